"""A testbed's and a DuT's parts that exist only once they are up — the registry of what to
undo, the namespaces, the DuT's interfaces and program — are asked for by name, and asking
before (or where the testbed has none) is a Failure that says so, never an AttributeError on
None. No root needed: nothing here is set up."""

from __future__ import annotations

import pytest

from lowtail.core.errors import Failure
from lowtail.testbed.cores import CoreRoles
from lowtail.testbed.duts import make_dut, options_from_json
from lowtail.testbed.interfaces import InterfacesTestbed
from lowtail.testbed.protocol import dut_namespace, dut_ports
from lowtail.testbed.topology import NamespacesTestbed
from lowtail.testbed.wiring import Interfaces
from lowtail.trace.run import start_run_trace


def test_a_testbed_not_entered_has_no_registry_to_set_up_with(tmp_path):
    tb = NamespacesTestbed(tmp_path)
    with pytest.raises(Failure, match="is not up"):
        tb.own_path(tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_calibration_wire_has_no_dut_namespace(tmp_path):
    wire = NamespacesTestbed(tmp_path, wire=True)
    with pytest.raises(Failure, match="no network namespace"):
        dut_namespace(wire)
    assert dut_namespace(NamespacesTestbed(tmp_path)).endswith("-dut")


def test_a_wiring_without_the_duts_interfaces_names_none(tmp_path):
    tb = InterfacesTestbed(tmp_path, Interfaces("eth1", "eth1", "eth2"), None)
    with pytest.raises(Failure, match="names no interfaces of the DuT's"):
        dut_ports(tb)
    assert dut_ports(InterfacesTestbed(tmp_path, Interfaces("eth1", "eth1", "eth2"), ("in1", "out1"))) == (
        "in1",
        "out1",
    )


def test_a_dut_not_started_has_no_program(tmp_path):
    dut = make_dut("lowtail-fwd", "fwd", options_from_json("lowtail-fwd", {}))
    with pytest.raises(Failure, match="was not started"):
        _ = dut.started
    assert dut.stop() == {}  # stopping one never started is nothing to do


def test_a_trace_on_a_testbed_not_up_says_why(tmp_path):
    """The trace sees the testbed through its protocol: without a registry there is no
    trace (and why), not an exception."""
    tb = NamespacesTestbed(tmp_path)
    tb.macs = {tb.tx: "02:00:00:00:00:01", tb.rx: "02:00:00:00:00:02"}
    tracer = start_run_trace(tb, CoreRoles(housekeeping=0, generator=1, capture=0, dut=[1]), None, 1.0, 1000.0)
    assert tracer.recordings == []
    assert "keeps no registry" in tracer.reason


def test_the_trace_tells_another_hosts_site_from_this_ones(tmp_path):
    """A hosts testbed's site is recorded through its SSH shell and a keeper leash
    (`RemoteTracedSite`); this host's site has neither and is traced with the registry."""
    from lowtail.testbed.hosts.remote import RemoteSite
    from lowtail.trace.protocol import RemoteTracedSite

    remote = object.__new__(RemoteSite)  # its attributes, without an SSH connection
    remote.label = "dut-1"
    assert isinstance(remote, RemoteTracedSite)
    assert not isinstance(NamespacesTestbed(tmp_path).site, RemoteTracedSite)
