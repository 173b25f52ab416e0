# Included after every project() call of the llama-cpp-python build (CMAKE_PROJECT_INCLUDE, scripts/engine_wheel.sh).
# llama-cpp-python forces LLAMA_BUILD_COMMON ON, but the Python package loads only libllama and libggml*: the common
# library (chat templates, argument parsing, nlohmann/json: some of the slowest files of the build) is never shipped.
# Turned off right after llama.cpp's project(), before its option() reads the cache; tests, tools, examples and
# the server are already off when llama.cpp is built as a subproject (LLAMA_STANDALONE is false).
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp: build common utils library (not shipped by llama-cpp-python)" FORCE)
endif()
