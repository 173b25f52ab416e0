"""The recorded-verdict formats: one module per format, named as the format is (``recorded.sources.<name>.format``),
each registering its reader with ``rubriclab.recorded.register_format``. The settings schema lists this folder's
modules as the allowed formats (``rubriclab.settings.RECORDED_FORMATS``), so adding a format is one new file
here (and its tests); ``tests/recorded/test_recorded_registry.py`` checks that every module registers the reader it names."""
