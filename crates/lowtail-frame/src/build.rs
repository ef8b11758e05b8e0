//! Building the frames of test traffic: Ethernet, 802.1Q/QinQ, IPv4/IPv6, UDP, and the
//! sequence id anywhere in the payload, prepared once and stamped per packet.

use std::net::IpAddr;

use crate::decode::{Endian, IdSpec};
use crate::marker::MARKER;

/// 802.1Q tagging of generated frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vlan {
    /// Untagged.
    None,
    /// One 802.1Q tag (TPID 0x8100).
    Single(u16),
    /// QinQ: an 802.1ad service tag (0x88a8) around a customer tag (0x8100).
    Double(u16, u16),
}

/// What the frames of one flow look like.
#[derive(Debug, Clone)]
pub struct TemplateSpec {
    /// Ethernet source address.
    pub src_mac: [u8; 6],
    /// Ethernet destination address.
    pub dst_mac: [u8; 6],
    /// 802.1Q tags.
    pub vlan: Vlan,
    /// IP source address; both addresses must be of the same family.
    pub src_ip: IpAddr,
    /// IP destination address.
    pub dst_ip: IpAddr,
    /// UDP source port (`set_src_port` changes it per flow).
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Size on the wire including the FCS (`MIN_FRAME_SIZE` to `MAX_FRAME_SIZE` for untagged
    /// frames): the frame itself is `FCS_BYTES` shorter, as a capture shows it.
    pub frame_size: usize,
    /// Where the id goes in the UDP payload.
    pub id: IdSpec,
}

impl Default for TemplateSpec {
    fn default() -> Self {
        TemplateSpec {
            src_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
            dst_mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x02],
            vlan: Vlan::None,
            src_ip: IpAddr::from([10, 0, 0, 1]),
            dst_ip: IpAddr::from([10, 0, 0, 2]),
            src_port: 49152,
            dst_port: 53,
            frame_size: 64,
            id: IdSpec::default(),
        }
    }
}

/// Why no frame can be built from a `TemplateSpec`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// One address is IPv4, the other IPv6.
    #[error("source and destination address must be both IPv4 or both IPv6")]
    MixedAddressFamilies,
    /// Ids are 4 or 8 bytes wide.
    #[error("id width must be 4 or 8 bytes, not {0}")]
    IdWidth(usize),
    /// The headers and the id do not fit in the frame.
    #[error("a {frame_size} B frame cannot hold the id: headers and id need {needed} B plus the 4 B FCS")]
    TooSmall {
        /// The requested size on the wire.
        frame_size: usize,
        /// Bytes the headers and the id need (without the FCS).
        needed: usize,
    },
    /// Larger than a jumbo frame.
    #[error("frame size {0} B exceeds a jumbo frame")]
    TooLarge(usize),
    /// The match marker does not fit after the id.
    #[error("a {frame_size} B frame cannot carry the match marker after the id: it needs {needed} B plus the 4 B FCS")]
    NoRoomForMarker {
        /// The requested size on the wire.
        frame_size: usize,
        /// Bytes the headers, the id and the marker need (without the FCS).
        needed: usize,
    },
}

/// A prepared frame; `frame(id)` writes the id (and fixes checksums) in place.
#[derive(Debug, Clone)]
pub struct FrameTemplate {
    bytes: Vec<u8>,
    id_at: usize,
    id: IdSpec,
    udp_at: usize,
    ipv6: bool,
    /// Where the match marker goes (right after the id), once `with_marker_room` made room.
    marker_at: Option<usize>,
}

/// Bytes of the Ethernet frame check sequence. A frame's size means its size on the wire,
/// FCS included (RFC 2544's 64, 128, …, 1518 B); the frame a socket sends and a capture
/// shows is `FCS_BYTES` shorter, the network card adding the FCS.
pub const FCS_BYTES: usize = 4;
/// The smallest frame on the wire, FCS included (RFC 2544, IEEE 802.3).
pub const MIN_FRAME_SIZE: usize = 64;
/// The largest untagged frame on the wire at the standard 1500-byte MTU, FCS included.
pub const MAX_FRAME_SIZE: usize = 1518;

impl FrameTemplate {
    /// Build the frame of `spec` once; `frame(id)` then only writes the id.
    pub fn new(spec: &TemplateSpec) -> Result<FrameTemplate, FrameError> {
        let ipv6 = match (spec.src_ip, spec.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => false,
            (IpAddr::V6(_), IpAddr::V6(_)) => true,
            _ => return Err(FrameError::MixedAddressFamilies),
        };
        if spec.id.width != 4 && spec.id.width != 8 {
            return Err(FrameError::IdWidth(spec.id.width));
        }
        let vlan_len = match spec.vlan {
            Vlan::None => 0,
            Vlan::Single(_) => 4,
            Vlan::Double(..) => 8,
        };
        let ip_len = if ipv6 { 40 } else { 20 };
        let udp_at = 14 + vlan_len + ip_len;
        let needed = udp_at + 8 + spec.id.offset + spec.id.width;
        let len = spec.frame_size.saturating_sub(FCS_BYTES).max(MIN_FRAME_SIZE - FCS_BYTES);
        if needed > len {
            return Err(FrameError::TooSmall { frame_size: spec.frame_size, needed });
        }
        if spec.frame_size > 9018 {
            return Err(FrameError::TooLarge(spec.frame_size));
        }
        let mut b = vec![0u8; len];
        b[0..6].copy_from_slice(&spec.dst_mac);
        b[6..12].copy_from_slice(&spec.src_mac);
        let mut at = 12;
        let mut tag = |b: &mut Vec<u8>, tpid: u16, vid: u16| {
            b[at..at + 2].copy_from_slice(&tpid.to_be_bytes());
            b[at + 2..at + 4].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
            at += 4;
        };
        match spec.vlan {
            Vlan::None => {}
            Vlan::Single(v) => tag(&mut b, 0x8100, v),
            Vlan::Double(outer, inner) => {
                tag(&mut b, 0x88a8, outer);
                tag(&mut b, 0x8100, inner);
            }
        }
        let ip_at = at + 2;
        let ip_payload = len - ip_at - ip_len;
        let udp_len = (len - udp_at) as u16;
        match (spec.src_ip, spec.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                b[at..at + 2].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut b[ip_at..ip_at + 20];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&((20 + ip_payload) as u16).to_be_bytes());
                ip[6] = 0x40; // don't fragment
                ip[8] = 64;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                let csum = checksum(&[ip], 0);
                ip[10..12].copy_from_slice(&csum.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                b[at..at + 2].copy_from_slice(&0x86ddu16.to_be_bytes());
                let ip = &mut b[ip_at..ip_at + 40];
                ip[0] = 0x60;
                ip[4..6].copy_from_slice(&(ip_payload as u16).to_be_bytes());
                ip[6] = 17;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&s.octets());
                ip[24..40].copy_from_slice(&d.octets());
            }
            _ => unreachable!(),
        }
        let udp = &mut b[udp_at..udp_at + 8];
        udp[0..2].copy_from_slice(&spec.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&spec.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        Ok(FrameTemplate { bytes: b, id_at: udp_at + 8 + spec.id.offset, id: spec.id, udp_at, ipv6, marker_at: None })
    }

    /// The same frame, able to carry the match marker (`set_marked`) right after its id.
    pub fn with_marker_room(mut self) -> Result<FrameTemplate, FrameError> {
        let at = self.id_at + self.id.width;
        if at + MARKER.len() > self.bytes.len() {
            return Err(FrameError::NoRoomForMarker {
                frame_size: self.bytes.len() + FCS_BYTES,
                needed: at + MARKER.len(),
            });
        }
        self.marker_at = Some(at);
        Ok(self)
    }

    /// Whether the next `frame` carries the match marker (zeros where it does not); a
    /// template made without `with_marker_room` never does.
    #[inline]
    pub fn set_marked(&mut self, marked: bool) {
        if let Some(at) = self.marker_at {
            let bytes = &mut self.bytes[at..at + MARKER.len()];
            if marked {
                bytes.copy_from_slice(MARKER);
            } else {
                bytes.fill(0);
            }
        }
    }

    /// The frame carrying `id` (valid until the next call).
    #[inline]
    pub fn frame(&mut self, id: u64) -> &[u8] {
        let at = self.id_at;
        match (self.id.width, self.id.endian) {
            (4, Endian::Big) => self.bytes[at..at + 4].copy_from_slice(&(id as u32).to_be_bytes()),
            (4, Endian::Little) => self.bytes[at..at + 4].copy_from_slice(&(id as u32).to_le_bytes()),
            (_, Endian::Big) => self.bytes[at..at + 8].copy_from_slice(&id.to_be_bytes()),
            (_, Endian::Little) => self.bytes[at..at + 8].copy_from_slice(&id.to_le_bytes()),
        }
        if self.ipv6 {
            self.fix_udp6_checksum();
        }
        &self.bytes
    }

    /// Change the UDP source port (one port per flow).
    pub fn set_src_port(&mut self, port: u16) {
        self.bytes[self.udp_at..self.udp_at + 2].copy_from_slice(&port.to_be_bytes());
    }

    /// Bytes in the frame as captured (without the FCS).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a frame has at least 60 bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// UDP over IPv6 must carry a checksum (RFC 8200); over IPv4 it stays 0 ("none").
    fn fix_udp6_checksum(&mut self) {
        let u = self.udp_at;
        self.bytes[u + 6] = 0;
        self.bytes[u + 7] = 0;
        let ip_at = u - 40;
        let udp_len = (self.bytes.len() - u) as u32;
        let mut pseudo = [0u8; 40];
        pseudo[0..32].copy_from_slice(&self.bytes[ip_at + 8..ip_at + 40]);
        pseudo[32..36].copy_from_slice(&udp_len.to_be_bytes());
        pseudo[39] = 17;
        let mut c = checksum(&[&pseudo, &self.bytes[u..]], 0);
        if c == 0 {
            c = 0xffff;
        }
        self.bytes[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    }
}

/// Internet checksum over several byte slices (each of even length but the last).
fn checksum(parts: &[&[u8]], initial: u32) -> u16 {
    let mut sum = initial;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u16::from_be_bytes([c[0], c[1]]) as u32;
        }
        if let [last] = chunks.remainder() {
            sum += (*last as u32) << 8;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{extract_id, Extracted};
    use lowtail_capture::LinkType;
    use proptest::prelude::*;

    #[test]
    fn minimum_frame_is_60_bytes_captured() {
        let mut t = FrameTemplate::new(&TemplateSpec::default()).unwrap();
        let f = t.frame(7);
        assert_eq!(f.len(), 60);
        // IPv4 header checksum verifies to zero
        assert_eq!(checksum(&[&f[14..34]], 0), 0);
    }

    #[test]
    fn too_small_for_the_id_is_an_error() {
        let spec = TemplateSpec { id: IdSpec { offset: 40, ..IdSpec::default() }, ..TemplateSpec::default() };
        assert_eq!(FrameTemplate::new(&spec).unwrap_err(), FrameError::TooSmall { frame_size: 64, needed: 90 });
        assert!(FrameTemplate::new(&spec).unwrap_err().to_string().contains("cannot hold the id"));
    }

    #[test]
    fn the_marker_follows_the_id_and_goes_again() {
        let mut t = FrameTemplate::new(&TemplateSpec { vlan: Vlan::Single(7), ..TemplateSpec::default() })
            .unwrap()
            .with_marker_room()
            .unwrap();
        let payload = 14 + 4 + 20 + 8;
        t.set_marked(true);
        let f = t.frame(9).to_vec();
        assert_eq!(&f[payload + 8..payload + 14], MARKER);
        t.set_marked(false);
        assert!(t.frame(10)[payload + 8..].iter().all(|b| *b == 0));
        let qinq = TemplateSpec { vlan: Vlan::Double(3, 7), ..TemplateSpec::default() };
        let err = FrameTemplate::new(&qinq).unwrap().with_marker_room().unwrap_err();
        assert_eq!(err, FrameError::NoRoomForMarker { frame_size: 64, needed: 64 });
    }

    proptest! {
        #[test]
        fn built_frames_decode_to_their_id(id: u64, v6: bool, vlan in 0u8..3, offset in 0usize..16,
                wide: bool, big: bool, size in 64usize..1519) {
            let (s, d): (IpAddr, IpAddr) = if v6 {
                ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
            } else {
                ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
            };
            let idspec = IdSpec { offset, width: if wide { 8 } else { 4 },
                endian: if big { Endian::Big } else { Endian::Little }, udp_dst_port: Some(53) };
            let spec = TemplateSpec { vlan: match vlan { 0 => Vlan::None, 1 => Vlan::Single(7), _ => Vlan::Double(3, 7) },
                src_ip: s, dst_ip: d, frame_size: size, id: idspec, ..TemplateSpec::default() };
            if let Ok(mut t) = FrameTemplate::new(&spec) {
                let f = t.frame(id).to_vec();
                let want = if wide { id } else { id as u32 as u64 };
                prop_assert_eq!(extract_id(LinkType::Ethernet, &f, f.len() as u32, &idspec), Extracted::Id(want));
                if v6 {
                    let u = f.len() - (f.len() - 14 - if vlan == 0 {0} else if vlan == 1 {4} else {8} - 40);
                    let mut pseudo = vec![0u8; 40];
                    pseudo[0..32].copy_from_slice(&f[u - 32..u]);
                    pseudo[32..36].copy_from_slice(&((f.len() - u) as u32).to_be_bytes());
                    pseudo[39] = 17;
                    prop_assert_eq!(checksum(&[&pseudo, &f[u..]], 0), 0);
                }
            }
        }
    }
}
