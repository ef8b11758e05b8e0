from typing import Any

def to_json(
    fig: Any, validate: bool = True, pretty: bool = False, remove_uids: bool = True, engine: str | None = None
) -> str: ...
