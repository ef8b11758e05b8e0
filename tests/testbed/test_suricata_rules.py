"""The Suricata DuT's rule sets and configuration without a testbed: what `rules` accepts,
the generated rules (every one parsed by Suricata itself, a sixteenth of them candidates for
every test frame), actions applied to a user's file, the configuration `suricata -T` takes,
and the rules axis of stored runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from lowtail.core.errors import UserError
from lowtail.store import axes
from lowtail.testbed.document import RuleFile, options_json
from lowtail.testbed.duts import KINDS
from lowtail.testbed.duts.options import RuleSet, RulesOption
from lowtail.testbed.duts.suricata import (
    CANDIDATE_EVERY,
    EveStatsError,
    SuricataSettings,
    check_config,
    config_text,
    counters,
    eve_stats,
    from_guest,
    generate_rules,
    invalid_reasons,
    last_stats,
    prepare_rules,
    with_action,
)

needs_suricata = pytest.mark.skipif(shutil.which("suricata") is None, reason="Suricata is not installed")
OPTION = RulesOption("none", named=("none", "default"))


def test_rules_is_a_number_a_word_or_a_file_held_with_its_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.rules").write_text("alert udp any any -> any 53 (sid:1;)\n")
    assert OPTION.check(1000) == 1000 and OPTION.check("default") == "default"
    held = OPTION.check("mine.rules")
    assert isinstance(held, RuleFile)
    assert held.path == str(tmp_path / "mine.rules") and len(held.sha256) == 64
    assert OPTION.check(held) == held  # a configuration reads back as itself
    assert OPTION.check({"path": held.path, "sha256": held.sha256}) == held  # and so does a stored one
    assert RuleSet.of(held).label() == f"mine.rules (sha {held.sha256[:8]})"
    assert RuleSet.of(1000).label() == "1,000 rules" and RuleSet.of("none").label() == "none"
    for bad in (-1, True, "", "nothing.rules", 2.5):
        with pytest.raises(ValueError):
            OPTION.check(bad)
    # Sweeps over rule sets, each configuration checked by the kind.
    configs = KINDS["suricata"].expand({"rules": ["none", "default", 10, "mine.rules"], "action": "drop"})
    assert [c.rules for c in configs][:3] == ["none", "default", 10] and configs[3].rules == held
    assert {c.action for c in configs} == {"drop"}


def test_a_rules_file_that_changed_since_the_experiment_was_read_is_refused(tmp_path):
    source = tmp_path / "mine.rules"
    source.write_text("alert udp any any -> any 53 (sid:1;)\n")
    rules = RuleSet.of(OPTION.check(str(source)))
    (tmp_path / "run-1").mkdir()
    copied = rules.copy_into(tmp_path / "run-1")
    assert copied.read_text() == source.read_text()
    source.write_text("drop udp any any -> any 53 (sid:1;)\n")
    with pytest.raises(UserError, match="changed since the experiment file was read"):
        rules.copy_into(tmp_path)


@pytest.mark.parametrize(
    ("count", "action", "port"), [(0, "alert", 53), (1, "drop", 53), (17, "alert", 5353), (300, "drop", 1)]
)
def test_generated_rules_are_unique_and_a_sixteenth_are_candidates_for_every_frame(count, action, port):
    lines = generate_rules(count, action, port).splitlines()
    assert len(lines) == count
    assert all(line.startswith(f"{action} udp any any -> any {port} (") for line in lines)
    sids = [line.rpartition("sid:")[2].partition(";")[0] for line in lines]
    assert len(set(sids)) == count
    # The candidates' fast pattern is in every test frame's payload (the id's zero high bytes);
    # the last rule matches the packets `match_share` marks, and only those.
    candidates = [line for line in lines if 'content:"|00 00 00 00|"; depth:4; fast_pattern;' in line]
    assert len(candidates) == -(-max(count - 1, 0) // CANDIDATE_EVERY)
    assert all("lowtail match marker" in line for line in lines[-1:])


def test_the_action_of_a_users_rules_is_set_and_nothing_else_changes():
    text = (
        "# a comment about alert rules\n"
        'alert udp any any -> any 53 (msg:"a"; sid:1;)\n'
        'drop tcp any any -> any 80 (msg:"alert drop"; sid:2;)\n'
        "pass udp any any -> any 5353 (sid:3;)\n"
        "# alert udp any any -> any 1 (sid:4;)\n"
    )
    dropped = with_action(text, "drop")
    assert dropped.splitlines()[1].startswith("drop udp") and 'msg:"alert drop"' in dropped
    assert dropped.splitlines()[3].startswith("pass udp") and dropped.splitlines()[0] == "# a comment about alert rules"
    assert dropped.splitlines()[4] == "# drop udp any any -> any 1 (sid:4;)"
    assert with_action(dropped, "alert").splitlines()[2].startswith("alert tcp")


@needs_suricata
@pytest.mark.parametrize("rules", ["none", "default", 2000])
def test_suricata_takes_the_configuration_and_every_rule_set(tmp_path, rules):
    prepared = prepare_rules(rules, "drop", 53, tmp_path)
    settings_ = SuricataSettings(("in0", "out0"), [1], [0], str(tmp_path), [str(f) for f in prepared.files])
    (tmp_path / "suricata.yaml").write_text(config_text(settings_))
    check_config(tmp_path / "suricata.yaml")
    done = subprocess.run(
        ["suricata", "-T", "-v", "-c", str(tmp_path / "suricata.yaml")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    if rules == 2000:
        assert "2000 rules successfully loaded, 0 rules failed" in done.stdout + done.stderr


@needs_suricata
def test_a_broken_rule_is_named_by_the_users_file_and_line(tmp_path):
    source = tmp_path / "mine.rules"
    source.write_text('alert udp any any -> any 53 (sid:1;)\nalert udp any any -> any 53 (content:"x; sid:2;)\n')
    prepared = prepare_rules(OPTION.check(str(source)), "alert", 53, tmp_path / "run")
    settings_ = SuricataSettings(("in0", "out0"), [0], [0], str(tmp_path / "run"), [str(f) for f in prepared.files])
    (tmp_path / "run" / "suricata.yaml").write_text(config_text(settings_))
    with pytest.raises(UserError, match=f"{source} at line 2: bad option value formatting"):
        check_config(tmp_path / "run" / "suricata.yaml", prepared.sources)


def test_counters_and_what_makes_a_run_invalid():
    record = (
        '{"event_type":"stats","stats":{"decoder":{"pkts":105,"udp":100,"event":{"ipv4":{"trunc_pkt":2,"opt_invalid":0}}},'
        '"capture":{"kernel_packets":105,"kernel_drops":3},"ips":{"accepted":90,"blocked":15,'
        '"drop_reason":{"rules":10,"flow_memcap":5}},"detect":{"alert":10,"engines":[{"rules_loaded":7,"rules_failed":0}]}}}'
    )
    found = counters(last_stats("not json\n" + record + "\n") or {})
    assert found["alerts"] == 10 and found["blocked"] == 15 and found["decoder_events"] == {"ipv4.trunc_pkt": 2}
    assert found["drop_reasons"] == {"rules": 10, "flow_memcap": 5} and found["rules_loaded"] == 7
    reasons = invalid_reasons(found, frames_sent=120)
    assert len(reasons) == 3
    assert "dropped 3 frames in the kernel" in reasons[0] and "saw 100 of the 120 frames" in reasons[1]
    assert "flow_memcap 5" in reasons[2]
    assert invalid_reasons(found | {"kernel_drops": 0, "drop_reasons": {"rules": 10}}, frames_sent=100) == []
    assert invalid_reasons(None, 10) == ["Suricata wrote no statistics: whether it saw every frame is unknown"]
    assert last_stats("") is None


def test_a_suricata_whose_counters_changed_shape_is_named_not_a_key_error():
    """Suricata's eve stats record is read into the counters lowtail keeps: a counter of
    another type, or decoder events nested otherwise than by layer, is one error naming
    where (a Suricata whose statistics lowtail cannot read), not a KeyError or a TypeError."""
    good = {"decoder": {"pkts": 5, "udp": 5, "event": {"ipv4": {"trunc_pkt": 1}}}, "detect": {"alert": 2}}
    assert counters(eve_stats(good))["decoder_events"] == {"ipv4.trunc_pkt": 1}
    assert counters(eve_stats({}))["udp"] == 0  # sections Suricata leaves out read as zeros (no `capture` off a pcap)
    for changed, where in (
        ({"decoder": {"pkts": "5"}}, "$.decoder.pkts"),
        (
            {"decoder": {"event": {"ipv4": {"frag": {"overlap": 1}}}}},
            "$.decoder.event[...][...]",
        ),  # msgspec names no map key
        ({"ips": {"drop_reason": []}}, "$.ips.drop_reason"),
        ({"detect": {"engines": {"rules_loaded": 3}}}, "$.detect.engines"),
    ):
        record = json.dumps({"event_type": "stats", "stats": changed})
        with pytest.raises(EveStatsError, match=re.escape(where)):
            last_stats(record + "\n")
        with pytest.raises(EveStatsError, match=re.escape(where)):
            from_guest({"program": "suricata", "eve": {"stats": changed}}, "alert", {"rules": "none"})
    # The guest's report becomes what a bare Suricata's run stores.
    stored = from_guest({"program": "suricata", "eve": {"stats": good}}, "drop", {"rules": 10, "port": 53})
    assert stored["program"] == "suricata" and stored["action"] == "drop" and stored["rules"] == 10
    assert stored["suricata"] == counters(eve_stats(good))


def test_rule_sets_are_an_axis_of_stored_runs():
    def run(rules: object) -> dict:
        return {
            "dut_name": "ips",
            "dut_kind": "suricata",
            "dut_config": {"rules": rules, "action": "alert"},
            "containment": {"mode": "bare"},
            "rate_pps": 10_000,
            "frame_size": 64,
            "burst": 1,
            "repetition": 0,
        }

    held = {"path": "/x/mine.rules", "sha256": "ab" * 32}
    rows = [run("none"), run(1000), run(held), run(held) | {"repetition": 1}]
    assert [a.name for a in axes.varying(rows, repetition=False)] == ["rules"]
    assert axes.label(rows[2], axes.varying(rows, repetition=False)) == "rules mine.rules (sha abababab)"
    assert axes.value_key(rows[2], axes.varying(rows)) != axes.value_key(rows[3], axes.varying(rows))
    assert axes.value_key(rows[2], axes.varying(rows, repetition=False)) == axes.value_key(
        rows[3], axes.varying(rows, repetition=False)
    )
    rules = axes.find("rules", rows)
    assert rules is not None and rules.matches(rows[1], "=", "1000") and rules.matches(rows[2], "~", "mine")


def test_the_ips_example_is_an_experiment_of_the_studies():
    from lowtail.experiment import spec

    text = spec.example_text("ips")
    exp = spec.parse(text, "ips.toml")
    combos = exp.combinations()
    kinds = {
        (c.dut.kind, str(options_json(c.dut.options).get("rules")), options_json(c.dut.options).get("containment"))
        for c in combos
    }
    for rules in ("none", "default", "1000"):
        assert ("suricata", rules, "bare") in kinds and ("suricata", rules, "container") in kinds
        assert ("vm", rules, None) in kinds
    assert sorted({c.traffic.rate_pps for c in combos}) == [10_000, 20_000, 50_000, 100_000]
    assert exp.verdict.budget_ns == 350_000
    with pytest.raises(UserError, match="examples: chain, flows, ips"):
        spec.example_text("snort")


def test_nftables_takes_the_same_rules_option(tmp_path, monkeypatch):
    """One rules type for both kinds: nftables' `rules` is a count as before, "none", or a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.nft").write_text("table bridge lowtail { }\n")
    configs = KINDS["nftables"].expand({"rules": [100, "none", "mine.nft"]})
    assert [c.rules for c in configs][:2] == [100, "none"]
    assert configs[2].rules.path == str(tmp_path / "mine.nft")
    assert KINDS["nftables"].options["rules"] is not KINDS["suricata"].options["rules"]
    assert type(KINDS["nftables"].options["rules"]) is type(KINDS["suricata"].options["rules"])
    assert KINDS["vm"].options["rules"] is KINDS["suricata"].options["rules"]
    with pytest.raises(ValueError, match="no file 'other.nft'"):
        KINDS["nftables"].expand({"rules": "other.nft"})
