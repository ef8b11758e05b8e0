"""The VM device under test (`kind = "vm"`): the guest image lowtail builds (kernels.py,
kmod.py, cpio.py, image.py, guest-init.sh), QEMU and its control channels (qemu.py), and
the DuT kind (dut.py)."""

# Said wherever VM runs under TCG are shown (`lowtail run`, the experiment report).
TCG_WARNING = (
    "VM runs marked TCG ran under QEMU's emulator (KVM does not work on this host): their latencies are an "
    "emulator's, many times those of a virtual machine on a real host. Compare them with each other, not "
    "with bare-metal or container runs."
)
