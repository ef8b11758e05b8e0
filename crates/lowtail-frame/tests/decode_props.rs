//! `extract_id` against frames built by an independent builder written here (not
//! `FrameTemplate`): every link type, VLAN stacks, IPv4 options, IPv6 extension
//! headers, ids anywhere; cut by a snap length; foreign frames; and garbage.

use lowtail_capture::LinkType;
use lowtail_frame::{extract_id, Endian, Extracted, FrameTemplate, IdSpec, TemplateSpec, Vlan};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Shape {
    link: LinkType,
    /// TPIDs of the VLAN tags, outermost first (Ethernet only).
    tags: Vec<u16>,
    ipv6: bool,
    /// IPv4 option words (IHL = 5 + this).
    v4_option_words: u8,
    /// IPv6 extension headers by next-header number: 0, 43, 60 (8·(1+len)), 44, 51.
    v6_ext: Vec<(u8, u8)>,
    dst_port: u16,
    payload: usize,
    id: IdSpec,
}

/// The frame, and where its id ends.
fn build(s: &Shape, id: u64) -> (Vec<u8>, usize) {
    let mut l4 = Vec::new();
    let udp_len = 8 + s.payload;
    l4.extend_from_slice(&1234u16.to_be_bytes());
    l4.extend_from_slice(&s.dst_port.to_be_bytes());
    l4.extend_from_slice(&(udp_len as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    let mut payload = vec![0x5au8; s.payload];
    let raw = match (s.id.width, s.id.endian) {
        (4, Endian::Big) => (id as u32).to_be_bytes().to_vec(),
        (4, Endian::Little) => (id as u32).to_le_bytes().to_vec(),
        (_, Endian::Big) => id.to_be_bytes().to_vec(),
        (_, Endian::Little) => id.to_le_bytes().to_vec(),
    };
    payload[s.id.offset..s.id.offset + s.id.width].copy_from_slice(&raw);
    l4.extend_from_slice(&payload);

    let mut l3 = Vec::new();
    if s.ipv6 {
        let mut ext = Vec::new();
        let mut next_of_prev = Vec::new();
        for &(kind, len) in &s.v6_ext {
            let start = ext.len();
            let size = match kind {
                44 => 8,
                51 => (len as usize + 2) * 4,
                _ => (len as usize + 1) * 8,
            };
            ext.resize(start + size, 0);
            ext[start + 1] = if kind == 44 { 0 } else { len };
            next_of_prev.push(start);
        }
        // chain: each header's first byte names the next one
        let kinds: Vec<u8> = s.v6_ext.iter().map(|e| e.0).chain([17]).collect();
        for (i, &start) in next_of_prev.iter().enumerate() {
            ext[start] = kinds[i + 1];
        }
        l3.extend_from_slice(&[0x60, 0, 0, 0]);
        l3.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
        l3.push(kinds[0]);
        l3.push(64);
        l3.extend_from_slice(&[0xfd; 32]);
        l3.extend_from_slice(&ext);
    } else {
        let ihl = 5 + s.v4_option_words as usize;
        l3.push(0x40 | ihl as u8);
        l3.push(0);
        l3.extend_from_slice(&((ihl * 4 + l4.len()) as u16).to_be_bytes());
        l3.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        l3.extend(std::iter::repeat_n(1u8, s.v4_option_words as usize * 4)); // NOP options
    }
    let ethertype: u16 = if s.ipv6 { 0x86dd } else { 0x0800 };
    let mut f = Vec::new();
    match s.link {
        LinkType::Ethernet => {
            f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            for &tpid in &s.tags {
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&[0x00, 0x64]);
            }
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        LinkType::RawIp => {}
        LinkType::Null => f.extend_from_slice(&(if s.ipv6 { 30u32 } else { 2 }).to_le_bytes()),
        LinkType::Loop => f.extend_from_slice(&(if s.ipv6 { 24u32 } else { 2 }).to_be_bytes()),
        LinkType::LinuxSll => {
            f.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        LinkType::LinuxSll2 => {
            f.extend_from_slice(&ethertype.to_be_bytes());
            f.extend_from_slice(&[0; 18]);
        }
    }
    f.extend_from_slice(&l3);
    let udp_at = f.len();
    f.extend_from_slice(&l4);
    (f, udp_at + 8 + s.id.offset + s.id.width)
}

const LINKS: [LinkType; 6] =
    [LinkType::Ethernet, LinkType::RawIp, LinkType::Null, LinkType::Loop, LinkType::LinuxSll, LinkType::LinuxSll2];

fn id_spec() -> impl Strategy<Value = IdSpec> {
    (0usize..24, any::<bool>(), any::<bool>(), prop::option::weighted(0.2, Just(53u16))).prop_map(
        |(offset, wide, big, port)| IdSpec {
            offset,
            width: if wide { 8 } else { 4 },
            endian: if big { Endian::Big } else { Endian::Little },
            udp_dst_port: port,
        },
    )
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        0usize..6,
        prop::collection::vec(prop::sample::select(vec![0x8100u16, 0x88a8, 0x9100]), 0..4),
        any::<bool>(),
        0u8..11,
        prop::collection::vec((prop::sample::select(vec![0u8, 43, 60, 44, 51]), 0u8..3), 0..4),
        prop_oneof![Just(53u16), any::<u16>()],
        0usize..40,
        id_spec(),
    )
        .prop_map(|(link, tags, ipv6, v4_option_words, v6_ext, dst_port, extra, id)| Shape {
            link: LINKS[link],
            tags: if link == 0 { tags } else { vec![] },
            ipv6,
            v4_option_words,
            v6_ext,
            dst_port,
            payload: id.offset + id.width + extra,
            id,
        })
}

fn expect(s: &Shape, id: u64) -> Extracted {
    match s.id.udp_dst_port {
        Some(p) if p != s.dst_port => Extracted::NotUdp,
        _ => Extracted::Id(if s.id.width == 4 { id as u32 as u64 } else { id }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn finds_the_id_in_every_shape(s in shape(), id: u64) {
        let (f, _) = build(&s, id);
        prop_assert_eq!(extract_id(s.link, &f, f.len() as u32, &s.id), expect(&s, id));
    }

    /// Cut by a snap length: before the id ends it is `Snapped` (the capture hides
    /// it), never a wrong id and never `NotUdp`; after, the id.
    #[test]
    fn snap_length_cuts(s in shape(), id: u64, cut in any::<prop::sample::Index>()) {
        let (f, id_end) = build(&s, id);
        let cut = cut.index(f.len() + 1);
        let got = extract_id(s.link, &f[..cut], f.len() as u32, &s.id);
        if cut >= id_end {
            prop_assert_eq!(got, expect(&s, id));
        } else if expect(&s, id) == Extracted::NotUdp && got == Extracted::NotUdp {
            // the port was readable before the cut: rightly not ours
        } else {
            prop_assert_eq!(got, Extracted::Snapped, "cut at {} of {}, id ends at {}", cut, f.len(), id_end);
        }
    }

    /// A datagram shorter than offset + width on the wire is `TooShort`.
    #[test]
    fn too_short_datagrams(s in shape(), id: u64, short_by in 1usize..8) {
        let mut s = s;
        s.id.udp_dst_port = None;
        let (mut f, id_end) = build(&s, id);
        // shrink the UDP length field and drop the bytes (the datagram really is shorter)
        let new_payload = s.id.offset + s.id.width - short_by.min(s.id.offset + s.id.width);
        let udp_at = id_end - 8 - s.id.offset - s.id.width;
        f.truncate(udp_at + 8 + new_payload);
        f[udp_at + 4..udp_at + 6].copy_from_slice(&((8 + new_payload) as u16).to_be_bytes());
        // IP lengths must follow, or the IP layer would say the datagram is longer
        fix_ip_length(&s, &mut f, udp_at);
        prop_assert_eq!(extract_id(s.link, &f, f.len() as u32, &s.id), Extracted::TooShort);
    }

    /// Whatever the bytes, no panic; an id is only found within the frame.
    #[test]
    fn garbage_never_panics(link in 0usize..6, data in prop::collection::vec(any::<u8>(), 0..120),
                            extra in 0u32..3000, spec in id_spec()) {
        let _ = extract_id(LINKS[link], &data, data.len() as u32 + extra, &spec);
    }

    /// The untagged-IPv4 fast path agrees with the general decoder: the same IPv4
    /// packet behind an Ethernet header (fast path) and behind a Linux cooked header
    /// (general path) gives the same answer, however its header bytes are mangled.
    #[test]
    fn fast_path_agrees_with_general_path(id: u64, spec in id_spec(), payload_extra in 0usize..20,
                                          flips in prop::collection::vec((14usize..60, any::<u8>()), 0..4),
                                          cut in any::<prop::sample::Index>()) {
        let mut t = FrameTemplate::new(&TemplateSpec { id: IdSpec { udp_dst_port: None, ..spec },
            frame_size: 64 + 8 + payload_extra + spec.offset, vlan: Vlan::None, ..TemplateSpec::default() }).unwrap();
        let mut eth = t.frame(id).to_vec();
        for (at, v) in flips {
            if at < eth.len() {
                eth[at] = v;
            }
        }
        let cut = 14 + cut.index(eth.len() - 14 + 1);
        let eth = &eth[..cut];
        let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
        sll.extend_from_slice(&eth[12..]);
        let orig = 64 + 8 + payload_extra as u32 + spec.offset as u32;
        prop_assert_eq!(extract_id(LinkType::Ethernet, eth, orig, &spec),
                        extract_id(LinkType::LinuxSll, &sll, orig + 2, &spec));
    }
}

fn fix_ip_length(s: &Shape, f: &mut [u8], udp_at: usize) {
    let l4 = (f.len() - udp_at) as u16;
    let l3_at = match s.link {
        LinkType::Ethernet => 14 + 4 * s.tags.len(),
        LinkType::RawIp => 0,
        LinkType::Null | LinkType::Loop => 4,
        LinkType::LinuxSll => 16,
        LinkType::LinuxSll2 => 20,
    };
    if s.ipv6 {
        let len = (udp_at - l3_at - 40) as u16 + l4;
        f[l3_at + 4..l3_at + 6].copy_from_slice(&len.to_be_bytes());
    } else {
        let len = (udp_at - l3_at) as u16 + l4;
        f[l3_at + 2..l3_at + 4].copy_from_slice(&len.to_be_bytes());
    }
}

#[test]
fn foreign_frames_are_not_udp() {
    let s = Shape {
        link: LinkType::Ethernet,
        tags: vec![],
        ipv6: false,
        v4_option_words: 0,
        v6_ext: vec![],
        dst_port: 53,
        payload: 8,
        id: IdSpec::default(),
    };
    let (f, _) = build(&s, 7);
    assert_eq!(extract_id(LinkType::Ethernet, &f, f.len() as u32, &s.id), Extracted::Id(7));
    // TCP
    let mut tcp = f.clone();
    tcp[23] = 6;
    assert_eq!(extract_id(LinkType::Ethernet, &tcp, tcp.len() as u32, &s.id), Extracted::NotUdp);
    // ARP
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(extract_id(LinkType::Ethernet, &arp, arp.len() as u32, &s.id), Extracted::NotUdp);
    // a later IPv4 fragment carries no UDP header
    let mut frag = f.clone();
    frag[20..22].copy_from_slice(&0x0010u16.to_be_bytes());
    assert_eq!(extract_id(LinkType::Ethernet, &frag, frag.len() as u32, &s.id), Extracted::NotUdp);
    // a first fragment (more fragments set, offset 0) does, and the id is in it
    let mut first = f.clone();
    first[20..22].copy_from_slice(&0x2000u16.to_be_bytes());
    assert_eq!(extract_id(LinkType::Ethernet, &first, first.len() as u32, &s.id), Extracted::Id(7));
    // a later IPv6 fragment
    let s6 = Shape { ipv6: true, v6_ext: vec![(44, 0)], ..s.clone() };
    let (mut f6, _) = build(&s6, 7);
    assert_eq!(extract_id(LinkType::Ethernet, &f6, f6.len() as u32, &s6.id), Extracted::Id(7));
    f6[14 + 40 + 2..14 + 40 + 4].copy_from_slice(&0x0008u16.to_be_bytes());
    assert_eq!(extract_id(LinkType::Ethernet, &f6, f6.len() as u32, &s6.id), Extracted::NotUdp);
    // too short to hold even an Ethernet header
    assert_eq!(extract_id(LinkType::Ethernet, &f[..10], 10, &s.id), Extracted::NotUdp);
}

/// Found by the extract_id fuzz target: a frame shorter than its IP header's length
/// field, captured whole (nothing cut), was reported as cut by the snap length.
#[test]
fn frame_shorter_than_its_ip_length_is_too_short_not_snapped() {
    let frame: [u8; 28] = [
        0x45, 0, 0, 0x2a, 0, 0, 0x40, 0, 0x40, 0x11, 0xd5, 0, 0, 0, 0, 0, 0, 0x03, 0x5a,
        0x5a, // IPv4, 42 B claimed
        0x5a, 0x5a, 0x5a, 0x5a, 0x01, 0x00, 0, 0, // UDP header, 256 B claimed; no payload captured
    ];
    let spec = IdSpec { offset: 0, width: 8, endian: Endian::Big, udp_dst_port: None };
    assert_eq!(extract_id(LinkType::RawIp, &frame, 28, &spec), Extracted::TooShort);
    assert_eq!(extract_id(LinkType::RawIp, &frame, 42, &spec), Extracted::Snapped);
}
