"""The warning every card carries when a role ran on the embedded chat model: its numbers are plumbing."""

from __future__ import annotations

EMBEDDED_NOTE = ("Numbers below come from the embedded SmolLM2-135M model, which is at chance as a pairwise judge: "
                 "they show the pipeline runs end to end and are NOT findings. Set real models in params.yaml "
                 "(llm.roles) for a real audit.")


def embedded_note(roles: list[str]) -> str | None:
    """The card's warning, naming the roles that run on the embedded chat model (None: no such role)."""
    if not roles:
        return None
    if any(r.startswith("judge") for r in roles):
        return f"{EMBEDDED_NOTE} Roles on the embedded model: {', '.join(roles)}."
    return (f"Roles {', '.join(roles)} run on the embedded SmolLM2-135M model: the numbers they feed (paraphrase ρ for "
            "the paraphraser, VFR for the attacker/verifier) show plumbing, not findings.")


def card_head(title: str, models: list[str], roles: list[str]) -> list[str]:
    """A card's first markdown lines: its title, the models behind it and, where roles ran on the embedded model,
    the warning that names them."""
    note = embedded_note(roles)
    return [f"# {title}", "", f"Models: {', '.join(models)}", "", *([f"> {note}", ""] if note else [])]
