"""The software testbed: network namespaces and veth links around a device under test,
the DuTs themselves, their containment, and the cleanup of everything a run made."""
