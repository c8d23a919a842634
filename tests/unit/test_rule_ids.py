"""Every rule id cited in the code resolves to its statement in ``docs/design.md``.

Comments and docstrings point at rules (``R-SESS-9``) instead of repeating them; a
pointer to a rule stated nowhere in the repository is a dead link for the reader.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
RULE_ID = re.compile(r"\bR-[A-Z]+-[0-9]+\b")
# A rule is defined by a list item that starts with its id in bold.
DEFINITION = re.compile(r"^- \*\*(R-[A-Z]+-[0-9]+)\*\* — ", flags=re.MULTILINE)


def defined_ids() -> list[str]:
    return DEFINITION.findall(DESIGN.read_text(encoding="utf-8"))


def cited_ids() -> dict[str, str]:
    """Each id cited under ``src/`` or ``tests/``, with one file that cites it."""
    cited: dict[str, str] = {}
    for folder in ("src", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in {".py", ".sql", ".md", ".toml", ".txt"}:
                continue
            for rule in RULE_ID.findall(path.read_text(encoding="utf-8")):
                cited.setdefault(rule, str(path.relative_to(ROOT)))
    return cited


def test_every_cited_rule_is_defined_in_the_design() -> None:
    defined = set(defined_ids())
    missing = {rule: where for rule, where in cited_ids().items() if rule not in defined}
    assert not missing, f"cited but not defined in docs/design.md: {missing}"


def test_each_rule_is_defined_once() -> None:
    ids = defined_ids()
    assert len(ids) == len(set(ids))


def test_the_design_defines_the_rules_the_code_relies_on() -> None:
    # Guards the definition pattern itself: a reformatted page must not pass vacuously.
    assert {"R-SESS-1", "R-SESS-12", "R-PG-4", "R-CLI-1", "R-GATE-1"} <= set(defined_ids())
    assert len(cited_ids()) > 40
