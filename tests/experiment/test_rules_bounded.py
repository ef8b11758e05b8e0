"""Rule sets are bounded input (issue 32): a rules file is named by its resolved path and a
line number, never by its content (before, `rules = "../../../../etc/shadow"` printed the
file's first line in Suricata's refusal); a number of rules, and a file's rules, are at most
a stated maximum with the memory it implies (before, `rules = 100000000000` grew ~100 MB/s
on `suricata` and `nftables`); `suricata -T` runs under the DuT's ready_timeout and says it
is still loading (before, a 200,000-rule file kept it busy 6.5 min, without a word)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "testbed"))
from tb_helpers import needs_kind  # noqa: E402
from test_run import experiment, lowtail, run_dirs  # noqa: E402

from lowtail.testbed.duts import (
    KINDS,  # noqa: E402
    suricata,  # noqa: E402
)
from lowtail.testbed.duts.nftables import MAX_RULES as NFT_MAX  # noqa: E402
from lowtail.testbed.duts.options import RulesOption  # noqa: E402

SECRET = "secret-user:*:20228:0:99999:7:::"


@pytest.mark.parametrize(("kind", "maximum"), [("suricata", suricata.MAX_RULES), ("nftables", NFT_MAX)])
def test_a_number_of_rules_past_the_maximum_is_refused_with_the_memory_it_implies(tmp_path, kind, maximum):
    toml = experiment(tmp_path, f'[[dut]]\nname = "d"\nkind = "{kind}"\nrules = 100000000000\n')
    done = lowtail(tmp_path, "run", str(toml), "--db", str(tmp_path / "t.duckdb"))
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert f"at most {maximum:,} rules" in line and "take about" in line and "not 100,000,000,000" in line, line
    assert run_dirs(tmp_path) == []


def test_a_rules_file_with_more_rules_than_the_maximum_is_refused_before_it_is_loaded(tmp_path):
    rules = tmp_path / "many.rules"
    line = 'alert udp any any -> any 53 (msg:"m"; content:"x"; sid:{};)\n'
    rules.write_text("".join(line.format(1_000_000 + i) for i in range(suricata.MAX_RULES + 1)))
    option = RulesOption(named=("none",), maximum=suricata.MAX_RULES, bytes_per_rule=suricata.BYTES_PER_RULE)
    with pytest.raises(ValueError, match=f"holds {suricata.MAX_RULES + 1:,} rules; lowtail loads at most"):
        option.check(str(rules))


def test_a_special_file_as_the_rules_file_is_refused_without_reading_it(tmp_path):
    option = RulesOption(named=("none",))
    with pytest.raises(ValueError, match="no file"):
        option.check("/dev/zero")


@needs_kind("suricata")
def test_a_file_suricata_refuses_is_named_by_path_and_line_never_by_its_content(tmp_path, monkeypatch):
    """A file named by mistake (another user's password file) is not shown on the terminal."""
    monkeypatch.chdir(tmp_path)  # rule paths are the user's, relative to where lowtail runs
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "shadow").write_text(SECRET + "\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    toml = experiment(tmp_path, '[[dut]]\nname = "ips"\nkind = "suricata"\nrules = "a/b/../../etc/shadow"\n')
    from lowtail.experiment import spec

    exp = spec.load(toml)
    config = exp.duts[0].options
    assert config.rules.path == str((tmp_path / "etc" / "shadow").resolve())
    from lowtail.core.errors import UserError

    said: list[str] = []
    with pytest.raises(UserError) as refused:
        suricata.Suricata.prepare(config, said.append)
    message = str(refused.value)
    assert str((tmp_path / "etc" / "shadow").resolve()) in message and "at line 1" in message, message
    assert "secret" not in message and "20228" not in message, message


@needs_kind("suricata")
@pytest.mark.slow  # over 1.5 s: make test runs it, make check leaves it out
def test_suricata_t_is_bounded_by_ready_timeout_and_says_it_is_still_loading(tmp_path, monkeypatch):
    monkeypatch.setattr(suricata, "PROGRESS_EVERY_S", 0.5)
    suricata._CHECKED.clear()
    config = KINDS["suricata"].expand({"rules": 50_000, "ready_timeout": "2s"})[0]
    said: list[str] = []
    from lowtail.core.errors import UserError

    with pytest.raises(UserError, match=r"did not finish loading the rule set within ready_timeout \(2 s\)"):
        suricata.Suricata.prepare(config, said.append)
    assert any("still loading the rule set" in line for line in said), said
