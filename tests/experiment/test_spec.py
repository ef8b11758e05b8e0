"""The experiment file: the shape of the issue works, lists sweep, and every mistake says
where it is."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowtail.core.errors import UserError
from lowtail.experiment import spec
from lowtail.store.codec import RUN_COLUMNS
from lowtail.testbed.document import DUT_OPTIONS, CustomOptions, LowtailFwdOptions, VmOptions, options_json
from lowtail.testbed.duts import KINDS, options_from_json
from lowtail.testbed.duts.options import (
    BoolOption,
    ChoiceOption,
    CommandsOption,
    CpusOption,
    DurationOption,
    IntOption,
    Option,
    RulesOption,
    StrOption,
    TextOption,
)
from lowtail.testbed.duts.suricata import GUEST_MEMORY_MIB
from lowtail.testbed.vm.kernels import FLAVOURS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from host_fixtures import cli  # noqa: E402

ISSUE_EXAMPLE = """\
[experiment]
name = "demo"
duration = "5s"
warmup = "1s"
repetitions = 1
[traffic]
rates = ["10000pps", "50000pps"]
frame_size = 64
burst = 1
udp_dst_port = 53
[[dut]]
name = "kernel"
kind = "kernel-mirred"
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
work_ns = 2000
batch = 1
"""


def error_of(text: str) -> str:
    with pytest.raises(UserError) as e:
        spec.parse(text, "exp.toml")
    return str(e.value)


def test_the_issue_example_gives_calibration_then_each_dut_at_each_rate():
    exp = spec.parse(ISSUE_EXAMPLE, "exp.toml")
    assert (exp.name, exp.duration_ns, exp.warmup_ns, exp.repetitions) == ("demo", 5 * 10**9, 10**9, 1)
    combos = exp.combinations()
    assert [(c.dut.name, c.traffic.rate_pps) for c in combos] == [
        ("wire", 10000),
        ("wire", 50000),
        ("kernel", 10000),
        ("kernel", 50000),
        ("fwd", 10000),
        ("fwd", 50000),
    ]
    fwd = combos[-1].dut
    assert options_json(fwd.options) == {
        "work_ns": 2000,
        "batch": 1,
        "spin_us": None,
        "batch_timeout_us": None,
        "containment": "bare",
        "cpus": None,
        "memory_reservation": 256,
    }
    assert all(c.traffic.udp_dst_port == 53 and c.traffic.frame_size == 64 for c in combos)
    assert exp.verdict == spec.Verdict(99.999, 1_000_000, 0)


def test_every_list_is_swept_and_repetitions_multiply():
    text = ISSUE_EXAMPLE.replace("frame_size = 64", "frame_size = [64, 1518]").replace(
        "repetitions = 1", "repetitions = 3"
    )
    text = text.replace("batch = 1", 'batch = [1, 32]\ncontainment = ["bare", "container"]\ncpus = [0]')
    exp = spec.parse(text, "exp.toml")
    combos = exp.combinations()
    per_traffic = 2 * 2 * 3  # rates × frame sizes × repetitions
    assert len(combos) == per_traffic * (1 + 1 + 4)  # wire, kernel, fwd × batch × containment
    assert len({c.key for c in combos}) == len(combos)
    fwd_configs = {(c.dut.options.batch, c.dut.options.containment) for c in combos if c.dut.name == "fwd"}
    assert fwd_configs == {(1, "bare"), (1, "container"), (32, "bare"), (32, "container")}
    assert all(c.dut.options.cpus == [0] for c in combos if c.dut.name == "fwd")


def test_combination_keys_are_stable_and_spec_hash_follows_the_content():
    a, b = spec.parse(ISSUE_EXAMPLE, "a.toml"), spec.parse(ISSUE_EXAMPLE, "b.toml")
    assert [c.key for c in a.combinations()] == [c.key for c in b.combinations()]
    assert a.spec_hash == b.spec_hash
    assert spec.parse(ISSUE_EXAMPLE.replace("5s", "6s"), "a.toml").spec_hash != a.spec_hash


def test_the_embedded_default_parses():
    exp = spec.load(None)
    assert exp.calibrate and {d.kind for d in exp.duts} == {"kernel-mirred", "lowtail-fwd"}
    assert len(exp.traffic) >= 2


def test_every_run_of_the_default_has_enough_packets_for_its_verdict_and_the_sweep_stays_short():
    exp = spec.load(None)
    assert exp.duration_ns is None  # "auto": each run decides its own
    for point in exp.traffic:
        measured = point.rate_pps * exp.measured_ns(point) // 1_000_000_000
        assert measured >= exp.verdict.packets_needed, (point.rate_pps, measured, exp.verdict.packets_needed)
    # `make run` must stay well under ten minutes: traffic alone, before set-up and analysis
    # (runs that can PASS at 99.999 % with 95 % confidence take ~480,000 packets each).
    traffic_s = sum(exp.traffic_ns(c.traffic) for c in exp.combinations()) / 1e9
    assert traffic_s <= 150, traffic_s


def test_auto_duration_is_enough_for_the_judged_percentile_at_each_rate_and_no_more():
    exp = spec.parse(
        '[experiment]\nduration = "auto"\n[traffic]\nrates = ["1000pps", "20000pps", "100000pps", "3000000pps"]\n'
        "[verdict]\npercentile = 99.99\n",
        "exp.toml",
    )
    needed = exp.verdict.packets_needed
    assert needed == 29_956  # ln 0.05 / ln 0.9999: the largest of that many bounds p99.99 at 95 %
    for point in exp.traffic:
        ns = exp.measured_ns(point)
        packets = point.rate_pps * ns / 1e9
        # enough with the margin to spare, and at most one step of rounding more
        assert packets >= needed * spec.AUTO_MARGIN, (point.rate_pps, ns)
        assert (
            ns == spec.MIN_DURATION_NS or packets < needed * spec.AUTO_MARGIN + point.rate_pps * spec.AUTO_STEP_NS / 1e9
        )
    assert exp.measured_ns(exp.traffic[0]) == 48 * 10**9  # 29,956 packets + 60 % at 1 kpps, to 0.1 s
    assert exp.measured_ns(exp.traffic[-1]) == spec.MIN_DURATION_NS  # 3 Mpps: a floor, not 16 ms


def test_a_fixed_duration_applies_to_every_rate():
    exp = spec.parse(ISSUE_EXAMPLE, "exp.toml")
    assert {exp.measured_ns(t) for t in exp.traffic} == {5 * 10**9}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[experiment]\nname = "x"\nduration = 5s\n', "exp.toml line 3, column 13: not valid TOML"),
        ("[traffic]\nrates = [1000,\n", "exp.toml line 2 (end of file): not valid TOML"),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "a"\nkind = "nope"\n',
            "exp.toml line 5: DuT 'a': unknown kind 'nope' (known: kernel-mirred, bridge, lowtail-fwd, dpdk-testpmd, custom, nftables, ovs, suricata, vm, external)",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "a"\nkind = "lowtail-fwd"\nwrk_ns = 5\n',
            "exp.toml line 6: DuT 'a' (lowtail-fwd): unknown option 'wrk_ns'",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "k"\nkind = "kernel-mirred"\ncontainment = "container"\n',
            "unknown option 'containment' for kind kernel-mirred (its options: none: it runs inside the kernel)",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n\n[[dut]]\nname = "a"\nkind = "lowtail-fwd"\nbatch = 0\n',
            "exp.toml line 7: DuT 'a' (lowtail-fwd): option 'batch' must be a whole number ≥ 1",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "v"\nkind = "vm"\nguest_forwarder = "snort"\n',
            "exp.toml line 6: DuT 'v' (vm): option 'guest_forwarder' must be one of mirred, bridge, lowtail-fwd",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "v"\nkind = "vm"\nvcpus = 2\nguest_kernel = "/no/vmlinuz"\n',
            "exp.toml line 7: DuT 'v' (vm): option 'guest_kernel' must be vanilla or rt or an existing vmlinuz file",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "f"\nkind = "nftables"\nrule_kind = "regex"\n',
            "exp.toml line 6: DuT 'f' (nftables): option 'rule_kind' must be one of ports, set, match",
        ),
        ("[traffic]\nrates = ['1000pps']\nfoo = 1\n", "exp.toml line 3: unknown key 'foo' in [traffic]"),
        ("[traffic]\nrates = ['1000pps']\n[trafic]\n", "exp.toml line 3: unknown section [trafic]"),
        (
            "[traffic]\nrates = ['1000pps']\nframe_size = [64, 9000]\n",
            "line 3: frame_size must be whole numbers from 64 to 1,518",
        ),
        ("[traffic]\nrates = []\n", "line 2: rates: an empty list sweeps over nothing"),
        ("[traffic]\nrates = ['0pps']\n", "line 2: rates must be from 1pps to 100Mpps"),
        ("[traffic]\nrates = [1000]\n", "line 2: rates: 1000 has no unit: write a rate with its unit"),
        ("[traffic]\nrates = ['1000']\n", "line 2: rates: 1000 has no unit"),
        ("[traffic]\nrates = ['1k']\n[verdict]\nbudget = 350\n", "line 4: budget: 350 has no unit"),
        ("[traffic]\nrates = ['1k']\n[verdict]\nbudget = '0.35'\n", "line 4: budget: 0.35 has no unit"),
        ("[experiment]\nduration = 10\n[traffic]\nrates = ['1k']\n", "line 2: duration: 10 has no unit"),
        (
            '[traffic]\nrates = ["1k"]\n[[dut]]\nname = "i"\nkind = "suricata"\nrule = 5\n',
            "line 6: DuT 'i' (suricata): unknown option 'rule' for kind suricata (did you mean 'rules'?",
        ),
        ('[traffic]\nrates = ["fast"]\n', "line 2: rates: cannot read 'fast' as a rate"),
        ("[traffic]\nrates = [true]\n", "line 2: rates must be a rate with its unit, such as 50kpps"),
        ('[experiment]\nduration = "soon"\n[traffic]\nrates = ["1pps"]\n', "line 2: duration: cannot read 'soon'"),
        ('[experiment]\nname = "x"\n', "[traffic] needs `rates`"),
        ('[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "a"\nkind = "custom"\n', "needs `command`"),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "a"\nkind = "custom"\ncommand = "fwd {inn}"\n',
            "unknown placeholder {inn}",
        ),
        (
            '[traffic]\nrates = ["1000pps"]\n[[dut]]\nname = "a"\nkind = "bridge"\n[[dut]]\nname = "a"\nkind = "bridge"\n',
            "line 7: DuT name 'a' is used twice",
        ),
        ("[traffic]\nrates = ['1000pps']\n[verdict]\npercentile = 99.5\n", "line 4: percentile must be one of"),
        ("[traffic]\nrates = ['1000pps']\n[cores]\ngenerator = 4096\n", "line 4: generator: core 4096 is not one"),
        ('[traffic]\nrates = ["1000pps"]\n[dut]\nname = "a"\n', "[[dut]] tables (double brackets)"),
    ],
)
def test_mistakes_say_what_and_where(text, expected):
    assert expected in error_of(text)


def test_a_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such experiment file"):
        spec.load(tmp_path / "nope.toml")


def test_print_default_gives_a_file_to_start_from(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "lowtail", "run", "--print-default"], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout == spec.default_text()
    assert spec.parse(done.stdout, "mine.toml").spec_hash == spec.load(None).spec_hash


def test_frame_size_means_one_thing_everywhere():
    """The size on the wire including the FCS (RFC 2544's 64 to 1518 B), from the frame
    crate's one definition: the experiment file's limits, its default file and
    lowtail-gen's help say the same."""
    import subprocess

    from lowtail import _native
    from lowtail.core.binaries import find_binary

    assert (spec.MIN_FRAME, spec.MAX_FRAME) == _native.FRAME_SIZES == (64, 1518) and _native.FCS_BYTES == 4
    wording = "including the 4-byte FCS"
    frame_line = next(line for line in spec.default_text().splitlines() if line.startswith("frame_size"))
    assert wording in frame_line
    help_text = subprocess.run([find_binary("lowtail-gen"), "--help"], capture_output=True, text=True).stdout
    assert wording in " ".join(help_text.split())
    with pytest.raises(UserError, match="frame_size must be whole numbers from 64 to 1,518"):
        spec.parse("[traffic]\nrates = ['1000pps']\nframe_size = 1522\n", "e.toml")


# -- [testbed]: real wiring ---------------------------------------------------------------------

INTERFACES = """\
[experiment]
name = "wired"
[traffic]
rates = ["10000pps"]
[testbed]
kind = "interfaces"
generator = "eth1"            # the generator transmits here
pre = "eth1"                  # the timestamper's PRE point (may be the generator's interface)
post = "eth4"                 # the timestamper's POST point
[[dut]]
name = "mirred"
kind = "kernel-mirred"
interfaces = ["eth2", "eth3"] # the DuT's in and out, in this host's namespace
[[dut]]
name = "switch"
kind = "external"
"""


def test_rates_are_written_as_everywhere_else():
    """ "50k" in compare's selection worked, not in the file's rates: one rate parser now."""
    exp = spec.parse('[traffic]\nrates = ["50k", "1.2M", "10kpps", "20 kpps", "2000pps"]\n', "e.toml")
    assert [t.rate_pps for t in exp.traffic] == [50_000, 1_200_000, 10_000, 20_000, 2_000]


def test_the_issue_interfaces_shape_parses_without_calibration():
    exp = spec.parse(INTERFACES, "exp.toml")
    assert (exp.testbed.kind, exp.testbed.generator, exp.testbed.pre, exp.testbed.post) == (
        "interfaces",
        "eth1",
        "eth1",
        "eth4",
    )
    assert not exp.calibrate  # a wire in the DuT's place is not lowtail's to make here
    assert [(c.dut.name, c.dut.interfaces) for c in exp.combinations()] == [
        ("mirred", ("eth2", "eth3")),
        ("switch", None),
    ]
    # The interfaces are part of what a run is: another wiring, another key.
    other = spec.parse(INTERFACES.replace('"eth2", "eth3"', '"eth5", "eth6"'), "exp.toml")
    assert exp.combinations()[0].key != other.combinations()[0].key
    # A namespaces experiment keeps the keys it had before [testbed] existed.
    assert "interfaces" not in spec.parse(ISSUE_EXAMPLE, "exp.toml").combinations()[0].key


def test_a_hosts_testbed_names_each_role_by_its_ssh_destination(tmp_path):
    (tmp_path / "id").write_text("key")
    text = """\
[traffic]
rates = ["10000pps"]
[testbed]
kind = "hosts"
identity = "id"
[testbed.loadgen]
ssh = "root@lg"
interface = "eth1"
[testbed.timestamper]
ssh = "root@ts"
pre = "eth1"
post = "eth2"
post_ssh = "ssh://root@ts2:2222"
workdir = "/scratch/lowtail"
[testbed.dut]
ssh = "root@dut"
[cores]
generator = 7
[[dut]]
name = "fwd"
kind = "lowtail-fwd"
interfaces = ["eth2", "eth3"]
"""
    (tmp_path / "h.toml").write_text(text)
    exp = spec.load(tmp_path / "h.toml")
    tb = exp.testbed
    assert tb.hosts == ["root@lg", "root@ts", "ssh://root@ts2:2222", "root@dut"]
    assert (tb.pre.host, tb.post.host, tb.post.interface) == ("root@ts", "ssh://root@ts2:2222", "eth2")
    assert tb.ssh.identity == str(tmp_path / "id")  # beside the experiment file
    assert tb.workdir("ssh://root@ts2:2222") == "/scratch/lowtail" and tb.workdir("root@lg") == "/var/tmp/lowtail"
    assert exp.cores == {"generator": 7}  # the LoadGen host's core: checked once it is reached


_LG = '[testbed.loadgen]\nssh = "root@lg"\ninterface = "a"\n'
_TS = '[testbed.timestamper]\nssh = "root@ts"\npre = "a"\npost = "b"\n'


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[testbed]\nkind = "cables"\n', "line 4: unknown testbed kind 'cables'"),
        ('[testbed]\nkind = "interfaces"\ngenerator = "eth1"\npre = "eth1"\n', "[testbed] needs `post`"),
        (
            '[testbed]\nkind = "interfaces"\ngenerator = "eth 1"\npre = "a"\npost = "b"\n',
            "line 5: generator must name an interface",
        ),
        (
            '[testbed]\nkind = "interfaces"\ngenerator = "a"\npre = "a"\npost = "b"\n[[dut]]\nname = "m"\nkind = "kernel-mirred"\n',
            "DuT 'm': on real wiring a DuT names the interfaces it forwards between",
        ),
        (
            '[testbed]\nkind = "interfaces"\ngenerator = "a"\npre = "a"\npost = "b"\n[[dut]]\nname = "v"\nkind = "vm"\ninterfaces = ["c", "d"]\n',
            "DuT 'v': kind vm runs on a namespaces testbed, not on this interfaces one",
        ),
        (
            '[[dut]]\nname = "m"\nkind = "kernel-mirred"\ninterfaces = ["c", "d"]\n',
            "interfaces are named only on real wiring",
        ),
        ('[[dut]]\nname = "x"\nkind = "external"\n', "kind external runs on a interfaces or hosts testbed"),
        (
            '[experiment]\ncalibrate = true\n[testbed]\nkind = "interfaces"\ngenerator = "a"\npre = "a"\npost = "b"\n',
            "calibrate = true needs a wire in the DuT's place",
        ),
        ('[testbed]\nkind = "hosts"\n', "a hosts testbed needs a [testbed.loadgen] table"),
        (
            '[testbed]\nkind = "hosts"\n[testbed.loadgen]\nssh = "-oProxyCommand=x"\ninterface = "a"\n' + _TS,
            "line 6: ssh must be an SSH destination",
        ),
        ('[testbed]\nkind = "hosts"\nidentity = "no-such-key"\n' + _LG + _TS, "identity: no such file"),
        (
            '[testbed]\nkind = "hosts"\n' + _LG + _TS + "[testbed.dut]\nsh = 1\n",
            "line 13: unknown key 'sh' in [testbed.dut]",
        ),
    ],
)
def test_testbed_mistakes_say_what_and_where(text, expected):
    assert expected in error_of("[traffic]\nrates = ['1000pps']\n" + text)


def test_testbed_durations_default_and_parse():
    exp = spec.parse(INTERFACES, "exp.toml")
    assert exp.testbed.settle_ns == 1_000_000_000 and exp.testbed.probe is True
    timed = spec.parse(INTERFACES.replace('post = "eth4"', 'post = "eth4"\nsettle = "250ms"\nprobe = false'), "x")
    assert (timed.testbed.settle_ns, timed.testbed.probe) == (250_000_000, False)


# -- each kind's options: typed from the file to the store and back ------------------------------

RULES_FILE = Path(tempfile.mkdtemp(prefix="lowtail-test-rules-")) / "mine.rules"
RULES_FILE.write_text("alert udp any any -> any 53 (sid:1;)\n")
_TEXT = st.text(st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="{}"), max_size=12)
_WORDS = _TEXT.filter(str.strip)


def _values(kind: str, name: str, option: Option) -> st.SearchStrategy[object]:
    """Values a user may write for one option (those a kind's own check would refuse left out)."""
    if name == "port":
        return st.integers(1, 65_535)
    if (kind, name) == ("vm", "memory"):
        return st.integers(GUEST_MEMORY_MIB, 4096)  # a guest IPS needs this much
    if name == "guest_kernel":
        return st.sampled_from(sorted(FLAVOURS))
    if name == "guest_cmdline":
        return _TEXT.filter(lambda t: "lowtail." not in t)
    if isinstance(option, RulesOption):
        return st.one_of(st.integers(0, 1000), st.sampled_from(option.named), st.just(str(RULES_FILE)))
    if isinstance(option, IntOption):
        return st.integers(option.minimum, option.minimum + 100_000)
    if isinstance(option, ChoiceOption):
        return st.sampled_from(option.choices)
    if isinstance(option, BoolOption):
        return st.booleans()
    if isinstance(option, CpusOption):
        return st.lists(st.integers(0, 1), min_size=1, max_size=2)
    if isinstance(option, DurationOption):
        return st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 10**6), st.sampled_from(("us", "ms", "s", "min")))
    if isinstance(option, CommandsOption):
        return st.lists(_WORDS, max_size=3)
    if isinstance(option, StrOption):
        return _WORDS
    if isinstance(option, TextOption):
        return _TEXT
    raise AssertionError(f"no values for {kind}'s option {name} ({type(option).__name__})")


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def _dut_file(kind: str, table: dict[str, object]) -> str:
    """An experiment file of one DuT of this kind with these options (on this host's
    interfaces where the kind does not run in a namespace)."""
    text = '[traffic]\nrates = ["1000pps"]\n'
    if "namespaces" not in KINDS[kind].testbeds:
        text += '[testbed]\nkind = "interfaces"\ngenerator = "eth1"\npre = "eth1"\npost = "eth2"\n'
        table = {"interfaces": ["eth3", "eth4"], **table}
    return text + f'[[dut]]\nname = "d"\nkind = "{kind}"\n' + "".join(f"{k} = {_toml(v)}\n" for k, v in table.items())


@st.composite
def _dut_table(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    """A kind and a [[dut]] table of some of its options (ruleset, a file that must exist, left out)."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    cls = KINDS[kind]
    table: dict[str, object] = {}
    for name, option in cls.options.items():
        if name == "ruleset" or not draw(st.booleans()):
            continue
        values = draw(st.lists(_values(kind, name, option), min_size=1, max_size=2))
        # One value, or a sweep over two (a list-valued option sweeps as a list of lists).
        table[name] = values if len(values) > 1 and not option.list_valued else values[0]
    if isinstance(table.get("guest_forwarder"), list):  # the IPS's options go with one forwarder
        table["guest_forwarder"] = table["guest_forwarder"][0]
    if kind == "vm" and table.get("guest_forwarder") != "suricata":
        table = {k: v for k, v in table.items() if k not in ("rules", "action", "port")}
    elif kind == "vm":
        table.setdefault("memory", GUEST_MEMORY_MIB)
    if kind == "custom" and not table.get("command") and not table.get("setup"):
        table["setup"] = ["true"]
    return kind, table


@settings(max_examples=150, deadline=None)
@given(_dut_table())
def test_every_kinds_options_round_trip_from_the_file_to_the_store_and_back(drawn):
    kind, table = drawn
    exp = spec.parse(_dut_file(kind, table), "exp.toml")
    column = RUN_COLUMNS["dut_config"]
    for dut in exp.duts:
        assert isinstance(dut.options, KINDS[kind].Options)
        stored = column.decode_text(column.encode(options_json(dut.options)))
        assert options_from_json(kind, stored) == dut.options


def test_each_kinds_typed_options_are_its_declared_options():
    """The struct a kind's configuration is typed as (the one the store's rows are read back
    into) has a field for each option it declares, no more."""
    for kind, cls in KINDS.items():
        assert DUT_OPTIONS[kind] is cls.Options, kind
        assert set(cls.Options.__struct_fields__) == set(cls.options), kind


def test_a_default_configuration_is_stored_as_before():
    """The stored options, and so the combination keys a sweep resumes by, of a kind's
    default configuration are what lowtail stored before they were typed."""
    assert options_json(KINDS["suricata"].expand({})[0]) == {
        "rules": "none",
        "action": "alert",
        "port": 53,
        "threads": 1,
        "ready_timeout": "3min",
        "containment": "bare",
        "cpus": None,
        "memory_reservation": 256,
    }
    assert options_json(KINDS["vm"].expand({})[0]) == {
        "guest_kernel": "vanilla",
        "guest_forwarder": "mirred",
        "work_ns": 0,
        "batch": 1,
        "spin_us": None,
        "guest_cmdline": "",
        "vcpus": 1,
        "memory": 256,
        "cpus": None,
        "accel": "auto",
        "guest_interrupts": True,
        "ready_timeout": "3min",
    }
    assert options_json(KINDS["custom"].expand({"command": "x"})[0]) == {
        "command": "x",
        "setup": [],
        "ready_timeout": "10s",
        "containment": "bare",
        "cpus": None,
        "memory_reservation": 256,
    }


def test_options_stored_by_an_older_lowtail_read_back_typed():
    """Rows stored before an option existed, a duration stored in nanoseconds, an option no
    longer known: read into today's struct, each in the one place that upgrades them."""
    custom = options_from_json("custom", {"command": "sleep 1", "setup": [], "ready_timeout": 5_000_000_000})
    assert isinstance(custom, CustomOptions)
    assert custom.ready_timeout == "5s" and custom.containment == "bare" and custom.teardown is msgspec.UNSET
    assert "teardown" not in options_json(custom)  # left out, as it was stored
    fwd = options_from_json("lowtail-fwd", {"work_ns": 2000, "batch": 4, "gone_option": 1})
    assert isinstance(fwd, LowtailFwdOptions) and (fwd.batch, fwd.batch_timeout_us, fwd.spin_us) == (4, None, None)
    vm = options_from_json("vm", {"guest_forwarder": "mirred"})
    assert isinstance(vm, VmOptions) and vm.rules is msgspec.UNSET and "rules" not in options_json(vm)
    chain = options_from_json(
        "chain",
        {"hops": [{"name": "fw", "kind": "nftables", "options": {"rules": 10}}, {"name": "k", "kind": "bridge"}]},
    )
    assert options_json(chain)["hops"][0]["options"]["rules"] == 10
    assert options_from_json("external", {"site": "lab"}) == options_from_json("external", {})
    assert options_from_json("analysis", {"anything": 1}) is None  # a plain analysis: no kind lowtail runs
    with pytest.raises(ValueError, match="not of their kind's shape"):
        options_from_json("suricata", {"rules": [1, 2]})


def _bad_value(option: Option) -> object:
    """A value the option refuses, by its type."""
    if isinstance(option, (CommandsOption, CpusOption)):
        return "one"
    if isinstance(option, (IntOption, RulesOption)):
        return -1
    if isinstance(option, DurationOption):
        return "soon"
    if isinstance(option, BoolOption):
        return "yes"
    if isinstance(option, TextOption):
        return 5
    return ""  # StrOption, ChoiceOption


@pytest.mark.parametrize(
    "kind, name", [(kind, name) for kind, cls in sorted(KINDS.items()) for name in cls.options if name != "ruleset"]
)
def test_a_bad_option_value_is_one_line_and_exit_2(tmp_path, capsys, kind, name):
    (tmp_path / "exp.toml").write_text(_dut_file(kind, {name: _bad_value(KINDS[kind].options[name])}))
    code, out, err = cli(capsys, "run", str(tmp_path / "exp.toml"), "--db", str(tmp_path / "l.duckdb"))
    assert code == 2 and out == "", (code, out)
    assert len(err.strip().splitlines()) == 1 and f"option '{name}'" in err, err
    assert not (tmp_path / "l.duckdb").exists()
