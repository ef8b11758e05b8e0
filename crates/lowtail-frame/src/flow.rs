//! Which flow a test packet belongs to, read from its headers: the key a flow is told
//! apart by (`FlowKey`) and the packet's values of it (`Flow`). Every packet that carries
//! an id is a UDP datagram, so a 5-tuple is source and destination address and port
//! (the protocol is always UDP).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use lowtail_capture::LinkType;

use crate::decode::{ipv4_udp, ipv6_udp, link_payload, Transport, ETH_IPV4, ETH_IPV6};

/// What tells one flow from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowKey {
    /// Source and destination address and UDP port (what RSS and a flow table hash).
    #[default]
    FiveTuple,
    /// The UDP source port alone (lowtail's generator puts each flow on its own).
    SrcPort,
    /// No flows: every packet is one flow (an imported capture whose flows mean nothing).
    None,
}

/// Every key by its name, in the order help texts list them.
pub const FLOW_KEYS: [FlowKey; 3] = [FlowKey::FiveTuple, FlowKey::SrcPort, FlowKey::None];

impl FlowKey {
    /// "5tuple", "src-port" or "none".
    pub fn name(self) -> &'static str {
        match self {
            FlowKey::FiveTuple => "5tuple",
            FlowKey::SrcPort => "src-port",
            FlowKey::None => "none",
        }
    }

    /// The key called `name`.
    pub fn from_name(name: &str) -> Option<FlowKey> {
        FLOW_KEYS.into_iter().find(|k| k.name() == name)
    }

    /// This packet's flow. A frame whose headers cannot be read (a MoonSniff record has
    /// none) is the default flow, as with `FlowKey::None`.
    #[inline]
    pub fn flow_of(self, link: LinkType, data: &[u8]) -> Flow {
        match self {
            FlowKey::None => Flow::default(),
            FlowKey::FiveTuple => five_tuple(link, data).unwrap_or_default(),
            FlowKey::SrcPort => {
                let tuple = five_tuple(link, data).unwrap_or_default();
                Flow { src_port: tuple.src_port, ..Flow::default() }
            }
        }
    }
}

/// The bytes a flow is read from in the shape nearly all test traffic has (untagged
/// Ethernet, a 20-byte IPv4 header, UDP): addresses and ports, twelve bytes packed in one
/// integer. Two frames with the same value are of the same flow under every key, so a
/// reader can compare this against the previous frame's and skip building the `Flow`
/// (which cost a sixth of the analysis on one flow). None for any other shape.
#[inline(always)]
pub fn quick_flow_bytes(link: LinkType, d: &[u8]) -> Option<u128> {
    if link != LinkType::Ethernet {
        return None;
    }
    let h: &[u8; 38] = d.first_chunk()?;
    if h[12..15] != [0x08, 0x00, 0x45] || h[23] != 17 {
        return None;
    }
    let mut bytes = [0u8; 16];
    bytes[..12].copy_from_slice(&h[26..38]);
    Some(u128::from_ne_bytes(bytes))
}

/// A packet's flow under some key: the fields the key leaves out are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flow {
    /// Source address (IPv4 in the first four bytes unless `v6`).
    pub src: [u8; 16],
    /// Destination address, as `src`.
    pub dst: [u8; 16],
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// The addresses are IPv6.
    pub v6: bool,
}

impl Flow {
    /// How a person reads this flow under `key`: "10.0.0.1:49152 > 10.0.0.2:53",
    /// "src port 49152", "all packets".
    pub fn describe(&self, key: FlowKey) -> String {
        match key {
            FlowKey::None => "all packets".to_string(),
            FlowKey::SrcPort => format!("src port {}", self.src_port),
            FlowKey::FiveTuple => self.to_string(),
        }
    }

    fn address(bytes: &[u8; 16], v6: bool) -> String {
        if v6 {
            format!("[{}]", Ipv6Addr::from(*bytes))
        } else {
            Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string()
        }
    }
}

impl fmt::Display for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} > {}:{}",
            Flow::address(&self.src, self.v6),
            self.src_port,
            Flow::address(&self.dst, self.v6),
            self.dst_port
        )
    }
}

/// Addresses and ports of a UDP datagram over IPv4 or IPv6; None when the frame is not one.
#[inline]
fn five_tuple(link: LinkType, d: &[u8]) -> Option<Flow> {
    if link == LinkType::Ethernet {
        if let Some(flow) = untagged_ipv4_udp(d) {
            return Some(flow);
        }
    }
    any_five_tuple(link, d)
}

/// The shape nearly all test traffic has — untagged Ethernet, a 20-byte IPv4 header, UDP —
/// read in place (`decode`'s fast path has checked the same shape for the id).
#[inline(always)]
fn untagged_ipv4_udp(d: &[u8]) -> Option<Flow> {
    let h: &[u8; 38] = d.first_chunk()?;
    if h[12..15] != [0x08, 0x00, 0x45] || h[23] != 17 {
        return None;
    }
    let mut flow = Flow::default();
    flow.src[..4].copy_from_slice(&h[26..30]);
    flow.dst[..4].copy_from_slice(&h[30..34]);
    flow.src_port = u16::from_be_bytes([h[34], h[35]]);
    flow.dst_port = u16::from_be_bytes([h[36], h[37]]);
    Some(flow)
}

/// `five_tuple` for any link type, tags and IP version.
fn any_five_tuple(link: LinkType, d: &[u8]) -> Option<Flow> {
    let (ethertype, l3) = link_payload(link, d)?;
    let mut flow = Flow::default();
    let udp = match ethertype {
        ETH_IPV4 => {
            let h = d.get(l3..l3 + 20)?;
            flow.src[..4].copy_from_slice(&h[12..16]);
            flow.dst[..4].copy_from_slice(&h[16..20]);
            ipv4_udp(d, l3)
        }
        ETH_IPV6 => {
            let h = d.get(l3..l3 + 40)?;
            flow.src.copy_from_slice(&h[8..24]);
            flow.dst.copy_from_slice(&h[24..40]);
            flow.v6 = true;
            ipv6_udp(d, l3)
        }
        _ => return None,
    };
    let Transport::Udp(start, _) = udp else { return None };
    let ports = d.get(start..start + 4)?;
    flow.src_port = u16::from_be_bytes([ports[0], ports[1]]);
    flow.dst_port = u16::from_be_bytes([ports[2], ports[3]]);
    Some(flow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameTemplate, IdSpec, TemplateSpec, Vlan};

    fn frame(spec: TemplateSpec, src_port: u16) -> Vec<u8> {
        let mut t = FrameTemplate::new(&spec).unwrap();
        t.set_src_port(src_port);
        t.frame(7).to_vec()
    }

    #[test]
    fn names_round_trip() {
        for key in FLOW_KEYS {
            assert_eq!(FlowKey::from_name(key.name()), Some(key));
        }
        assert_eq!(FlowKey::from_name("5-tuple"), None);
    }

    #[test]
    fn five_tuple_of_ipv4_and_tagged_ipv6() {
        let v4 = TemplateSpec { id: IdSpec::default(), ..TemplateSpec::default() };
        let f = FlowKey::FiveTuple.flow_of(LinkType::Ethernet, &frame(v4.clone(), 49153));
        assert_eq!(f.src_port, 49153);
        assert!(f.describe(FlowKey::FiveTuple).contains(":49153 > "), "{f}");
        let v6 = TemplateSpec {
            src_ip: "fd00::1".parse().unwrap(),
            dst_ip: "fd00::2".parse().unwrap(),
            vlan: Vlan::Double(200, 100),
            frame_size: 128,
            ..v4
        };
        let f6 = FlowKey::FiveTuple.flow_of(LinkType::Ethernet, &frame(v6, 50000));
        assert_eq!(f6.to_string(), format!("[fd00::1]:50000 > [fd00::2]:{}", f6.dst_port));
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_decoder() {
        for port in [1u16, 49152, 65535] {
            let f = frame(TemplateSpec::default(), port);
            assert_eq!(untagged_ipv4_udp(&f), any_five_tuple(LinkType::Ethernet, &f));
            assert!(untagged_ipv4_udp(&f).is_some());
        }
        let tagged = frame(TemplateSpec { vlan: Vlan::Single(7), ..TemplateSpec::default() }, 9);
        assert_eq!(untagged_ipv4_udp(&tagged), None);
        assert_eq!(five_tuple(LinkType::Ethernet, &tagged).map(|f| f.src_port), Some(9));
    }

    proptest::proptest! {
        /// What lets the reader skip building a flow: frames with the same quick bytes are
        /// one flow under every key, and a frame of another shape has none.
        #[test]
        fn equal_quick_bytes_are_one_flow_under_every_key(
            a in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            b in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            header in proptest::bool::ANY,
            same_tuple in proptest::bool::ANY,
        ) {
            let (mut a, mut b) = (a, b);
            if header && a.len() >= 38 && b.len() >= 38 {
                for d in [&mut a, &mut b] {
                    d[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
                    d[23] = 17;
                }
                if same_tuple {
                    let tuple = a[26..38].to_vec();
                    b[26..38].copy_from_slice(&tuple);
                }
            }
            let (qa, qb) = (quick_flow_bytes(LinkType::Ethernet, &a), quick_flow_bytes(LinkType::Ethernet, &b));
            if qa.is_some() {
                proptest::prop_assert_eq!(qa.map(|_| ()), untagged_ipv4_udp(&a).map(|_| ()));
            }
            if qa.is_some() && qa == qb {
                for key in FLOW_KEYS {
                    proptest::prop_assert_eq!(key.flow_of(LinkType::Ethernet, &a), key.flow_of(LinkType::Ethernet, &b));
                }
            }
            proptest::prop_assert_eq!(quick_flow_bytes(LinkType::RawIp, &a), None);
        }
    }

    #[test]
    fn keys_leave_out_what_they_do_not_use() {
        let spec = TemplateSpec::default();
        let (a, b) = (frame(spec.clone(), 1000), frame(spec, 1001));
        assert_ne!(FlowKey::SrcPort.flow_of(LinkType::Ethernet, &a), FlowKey::SrcPort.flow_of(LinkType::Ethernet, &b));
        assert_eq!(FlowKey::None.flow_of(LinkType::Ethernet, &a), FlowKey::None.flow_of(LinkType::Ethernet, &b));
        assert_eq!(FlowKey::SrcPort.flow_of(LinkType::Ethernet, &a).describe(FlowKey::SrcPort), "src port 1000");
        assert_eq!(FlowKey::FiveTuple.flow_of(LinkType::Ethernet, &[0u8; 10]), Flow::default());
    }
}
