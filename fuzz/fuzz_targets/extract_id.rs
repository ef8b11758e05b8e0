//! Finding the id in a frame: any link type, any id layout, any snap length.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lowtail_capture::LinkType;
use lowtail_frame::{extract_id, Endian, Extracted, IdSpec};

const LINKS: [LinkType; 6] =
    [LinkType::Ethernet, LinkType::RawIp, LinkType::Null, LinkType::Loop, LinkType::LinuxSll, LinkType::LinuxSll2];

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (head, frame) = data.split_at(4);
    let spec = IdSpec {
        offset: (head[1] & 0x3f) as usize,
        width: if head[1] & 0x40 != 0 { 8 } else { 4 },
        endian: if head[1] & 0x80 != 0 { Endian::Big } else { Endian::Little },
        udp_dst_port: (head[0] & 0x80 != 0).then_some(53),
    };
    let orig_len = frame.len() as u32 + u16::from_le_bytes([head[2], head[3]]) as u32 % 1600;
    let link = LINKS[(head[0] & 0x7f) as usize % LINKS.len()];
    let got = extract_id(link, frame, orig_len, &spec);
    if let Extracted::Id(id) = got {
        // the id was read from the frame's bytes: its width bounds it, and it exists in them
        if spec.width == 4 {
            assert!(id <= u32::MAX as u64);
        }
        let raw = match (spec.width, spec.endian) {
            (4, Endian::Big) => (id as u32).to_be_bytes().to_vec(),
            (4, Endian::Little) => (id as u32).to_le_bytes().to_vec(),
            (_, Endian::Big) => id.to_be_bytes().to_vec(),
            (_, Endian::Little) => id.to_le_bytes().to_vec(),
        };
        assert!(frame.windows(raw.len()).any(|w| w == raw.as_slice()), "id {id:#x} is not in the frame");
    }
    if orig_len as usize == frame.len() {
        assert_ne!(got, Extracted::Snapped, "nothing was cut, yet Snapped");
    }
});
