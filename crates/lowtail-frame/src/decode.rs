//! Finding the packet id again in any captured frame, whatever the link layer, tags or
//! IP version, without copying the frame.

use lowtail_capture::LinkType;

/// Byte order of the id in the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Network byte order.
    Big,
    /// Least significant byte first (MoonGen's ids).
    Little,
}

impl Endian {
    /// "big" or "little".
    pub fn name(self) -> &'static str {
        match self {
            Endian::Big => "big",
            Endian::Little => "little",
        }
    }

    /// The byte order called `name` ("big", "little").
    pub fn from_name(name: &str) -> Option<Endian> {
        match name {
            "big" => Some(Endian::Big),
            "little" => Some(Endian::Little),
            _ => None,
        }
    }
}

/// The id layouts known by name: presets of `IdSpec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdFormat {
    /// lowtail's own generator: u64 big-endian at payload offset 0.
    #[default]
    Lowtail,
    /// MoonGen/MoonSniff: u32 little-endian at payload offset 0.
    MoonSniff,
}

impl IdFormat {
    /// "lowtail" or "moonsniff".
    pub fn name(self) -> &'static str {
        match self {
            IdFormat::Lowtail => "lowtail",
            IdFormat::MoonSniff => "moonsniff",
        }
    }

    /// The format called `name` ("lowtail", "moonsniff").
    pub fn from_name(name: &str) -> Option<IdFormat> {
        match name {
            "lowtail" => Some(IdFormat::Lowtail),
            "moonsniff" => Some(IdFormat::MoonSniff),
            _ => None,
        }
    }

    /// Where this format puts the id.
    pub fn spec(self) -> IdSpec {
        match self {
            IdFormat::Lowtail => IdSpec::default(),
            IdFormat::MoonSniff => IdSpec::moonsniff(),
        }
    }
}

/// Where the packet id lives: `offset` bytes into the UDP payload, `width` 4 or 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdSpec {
    /// Bytes from the start of the UDP payload to the id.
    pub offset: usize,
    /// 4 or 8 bytes.
    pub width: usize,
    /// The id's byte order.
    pub endian: Endian,
    /// Only UDP datagrams to this destination port carry ids (others are foreign).
    pub udp_dst_port: Option<u16>,
}

impl Default for IdSpec {
    /// lowtail's own generator: a 64-bit big-endian sequence number at payload offset 0.
    fn default() -> Self {
        IdSpec { offset: 0, width: 8, endian: Endian::Big, udp_dst_port: None }
    }
}

impl IdSpec {
    /// MoonGen/MoonSniff packets: u32 little-endian at payload offset 0.
    pub fn moonsniff() -> Self {
        IdSpec { offset: 0, width: 4, endian: Endian::Little, udp_dst_port: None }
    }

    #[inline(always)]
    fn read(&self, b: &[u8]) -> u64 {
        match (self.width, self.endian) {
            (4, Endian::Big) => u32::from_be_bytes(b[..4].try_into().unwrap()) as u64,
            (4, Endian::Little) => u32::from_le_bytes(b[..4].try_into().unwrap()) as u64,
            (_, Endian::Big) => u64::from_be_bytes(b[..8].try_into().unwrap()),
            (_, Endian::Little) => u64::from_le_bytes(b[..8].try_into().unwrap()),
        }
    }
}

/// What a frame turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extracted {
    /// A UDP datagram carrying this id.
    Id(u64),
    /// Not UDP (or a later IP fragment, or another destination port).
    NotUdp,
    /// A UDP datagram too short to hold the id.
    TooShort,
    /// The datagram is long enough on the wire, but the capture's snap length cut
    /// the id off.
    Snapped,
}

pub(crate) const ETH_IPV4: u16 = 0x0800;
pub(crate) const ETH_IPV6: u16 = 0x86dd;
const PROTO_UDP: u8 = 17;

/// Find the packet id in a frame of the given link type.
#[inline]
pub fn extract_id(link: LinkType, data: &[u8], orig_len: u32, spec: &IdSpec) -> Extracted {
    if link == LinkType::Ethernet {
        if let Some(id) = untagged_ipv4_udp(data, spec) {
            return Extracted::Id(id);
        }
    }
    extract_any(link, data, orig_len, spec)
}

/// The shape nearly all test traffic has — untagged Ethernet, a 20-byte IPv4 header,
/// an unfragmented UDP datagram holding the id — checked in one pass.
#[inline(always)]
fn untagged_ipv4_udp(d: &[u8], spec: &IdSpec) -> Option<u64> {
    let h: &[u8; 42] = d.first_chunk()?;
    let word = |at: usize| u32::from_be_bytes(*h[at..].first_chunk().expect("within the 42 bytes"));
    // EtherType 0x0800 and version/IHL 0x45 (the byte after, the TOS, is anything); the
    // first fragment (offset zero, whatever the flags), as `ipv4_udp` has it; UDP.
    if word(12) >> 8 != 0x08_0045 || word(20) & 0x1fff_0000 != 0 || h[23] != PROTO_UDP {
        return None;
    }
    if let Some(port) = spec.udp_dst_port {
        if u16::from_be_bytes([h[36], h[37]]) != port {
            return None;
        }
    }
    let ip_end = 14 + u16::from_be_bytes([h[16], h[17]]) as usize;
    let udp_end = 34 + (u16::from_be_bytes([h[38], h[39]]) as usize).max(8);
    let id_start = 42 + spec.offset;
    let id_end = id_start + spec.width;
    if id_end > ip_end.min(udp_end) || id_end > d.len() {
        return None;
    }
    Some(spec.read(&d[id_start..id_end]))
}

fn extract_any(link: LinkType, data: &[u8], orig_len: u32, spec: &IdSpec) -> Extracted {
    let snapped = (orig_len as usize) > data.len();
    let (ethertype, l3) = match link_payload(link, data) {
        Some(x) => x,
        None => return if snapped { Extracted::Snapped } else { Extracted::NotUdp },
    };
    let udp = match ethertype {
        ETH_IPV4 => ipv4_udp(data, l3),
        ETH_IPV6 => ipv6_udp(data, l3),
        _ if data.len() < l3 + 20 => Transport::Cut,
        _ => Transport::NotUdp,
    };
    let (udp_start, ip_end) = match udp {
        Transport::Udp(start, end) => (start, end),
        Transport::Cut if snapped => return Extracted::Snapped,
        Transport::Cut | Transport::NotUdp => return Extracted::NotUdp,
    };
    if udp_start + 8 > data.len() {
        return if snapped { Extracted::Snapped } else { Extracted::NotUdp };
    }
    let udp_hdr = &data[udp_start..udp_start + 8];
    if let Some(port) = spec.udp_dst_port {
        if u16::from_be_bytes([udp_hdr[2], udp_hdr[3]]) != port {
            return Extracted::NotUdp;
        }
    }
    let udp_len = u16::from_be_bytes([udp_hdr[4], udp_hdr[5]]) as usize;
    let datagram_end = (udp_start + udp_len.max(8)).min(ip_end);
    let id_start = udp_start + 8 + spec.offset;
    let id_end = id_start + spec.width;
    if id_end > datagram_end {
        return Extracted::TooShort;
    }
    if id_end > data.len() {
        // Cut by the snap length, or — when nothing was cut — a frame shorter than
        // its own IP header says: the datagram really is too short for the id.
        return if snapped { Extracted::Snapped } else { Extracted::TooShort };
    }
    Extracted::Id(spec.read(&data[id_start..id_end]))
}

/// (ethertype, offset of the layer-3 header), VLAN tags skipped.
#[inline]
pub(crate) fn link_payload(link: LinkType, d: &[u8]) -> Option<(u16, usize)> {
    match link {
        LinkType::Ethernet => {
            let mut off = 12;
            loop {
                let et = u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]);
                match et {
                    0x8100 | 0x88a8 | 0x9100 => off += 4,
                    _ => return Some((et, off + 2)),
                }
            }
        }
        LinkType::RawIp => match d.first()? >> 4 {
            4 => Some((ETH_IPV4, 0)),
            6 => Some((ETH_IPV6, 0)),
            _ => None,
        },
        LinkType::Null | LinkType::Loop => {
            let raw: [u8; 4] = d.get(..4)?.try_into().ok()?;
            let family = if link == LinkType::Loop {
                u32::from_be_bytes(raw)
            } else if u32::from_le_bytes(raw) < 256 {
                u32::from_le_bytes(raw)
            } else {
                u32::from_be_bytes(raw)
            };
            match family {
                2 => Some((ETH_IPV4, 4)),
                10 | 24 | 28 | 30 => Some((ETH_IPV6, 4)),
                _ => None,
            }
        }
        LinkType::LinuxSll => Some((u16::from_be_bytes([*d.get(14)?, *d.get(15)?]), 16)),
        LinkType::LinuxSll2 => Some((u16::from_be_bytes([*d.first()?, *d.get(1)?]), 20)),
    }
}

/// What the IP layer leads to.
pub(crate) enum Transport {
    /// (offset of the UDP header, end of the IP packet)
    Udp(usize, usize),
    NotUdp,
    /// The captured bytes end inside the IP headers: a snap length may hide a UDP header.
    Cut,
}

/// The first fragment of a UDP datagram over IPv4.
#[inline]
pub(crate) fn ipv4_udp(d: &[u8], off: usize) -> Transport {
    let Some(h) = d.get(off..off + 20) else { return Transport::Cut };
    if h[0] >> 4 != 4 || h[9] != PROTO_UDP {
        return Transport::NotUdp;
    }
    let ihl = (h[0] & 0x0f) as usize * 4;
    if ihl < 20 || u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0 {
        return Transport::NotUdp;
    }
    let total = u16::from_be_bytes([h[2], h[3]]) as usize;
    let end = if total >= ihl { off + total } else { usize::MAX };
    Transport::Udp(off + ihl, end)
}

/// Same for IPv6, walking extension headers (a snap length can cut them too).
#[inline]
pub(crate) fn ipv6_udp(d: &[u8], off: usize) -> Transport {
    let Some(h) = d.get(off..off + 40) else { return Transport::Cut };
    if h[0] >> 4 != 6 {
        return Transport::NotUdp;
    }
    let payload_len = u16::from_be_bytes([h[4], h[5]]) as usize;
    let end = if payload_len == 0 { usize::MAX } else { off + 40 + payload_len };
    let mut next = h[6];
    let mut pos = off + 40;
    for _ in 0..8 {
        match next {
            PROTO_UDP => return Transport::Udp(pos, end),
            0 | 43 | 60 => {
                let Some(ext) = d.get(pos..pos + 2) else { return Transport::Cut };
                next = ext[0];
                pos += (ext[1] as usize + 1) * 8;
            }
            44 => {
                let Some(frag) = d.get(pos..pos + 8) else { return Transport::Cut };
                if u16::from_be_bytes([frag[2], frag[3]]) & 0xfff8 != 0 {
                    return Transport::NotUdp;
                }
                next = frag[0];
                pos += 8;
            }
            51 => {
                let Some(ext) = d.get(pos..pos + 2) else { return Transport::Cut };
                next = ext[0];
                pos += (ext[1] as usize + 2) * 4;
            }
            _ => return Transport::NotUdp,
        }
    }
    Transport::NotUdp
}
