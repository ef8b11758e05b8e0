/// The link layers lowtail can decode down to UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet II, with or without 802.1Q/QinQ tags.
    Ethernet,
    /// Raw IPv4 or IPv6, version read from the first nibble.
    RawIp,
    /// BSD loopback: 4-byte address family in host order.
    Null,
    /// OpenBSD loopback: 4-byte address family in network order.
    Loop,
    /// Linux cooked capture, version 1 (`any` device).
    LinuxSll,
    /// Linux cooked capture, version 2.
    LinuxSll2,
}

impl LinkType {
    /// Map a pcap LINKTYPE_ number; `None` for the ones lowtail cannot decode.
    pub fn from_pcap(linktype: i32) -> Option<LinkType> {
        Some(match linktype {
            1 => LinkType::Ethernet,
            12 | 14 | 101 | 228 | 229 => LinkType::RawIp,
            0 => LinkType::Null,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            _ => return None,
        })
    }

    /// The pcap LINKTYPE_ number a writer records.
    pub fn to_pcap(self) -> i32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::Null => 0,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
        }
    }
}
