//! When the id options match almost nothing, find out why and say what would work.

use std::collections::HashSet;

use lowtail_capture::LinkType;

use lowtail_frame::{extract_id, Endian, Extracted, IdSpec};

/// A frame kept for diagnosis.
#[derive(Debug, Clone)]
pub struct SampleFrame {
    /// The frame's link type.
    pub link: LinkType,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// The frame's length on the wire.
    pub orig_len: u32,
}

/// How well a spec explains a sample of both sides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The id options tried.
    pub spec: IdSpec,
    /// Distinct PRE ids also seen in POST, over the PRE sample size.
    pub shared: f64,
    /// Fraction of consecutive PRE ids that differ by exactly one.
    pub sequential: f64,
}

/// How well `spec` finds ids shared by the PRE and POST samples.
pub fn fit(spec: &IdSpec, pre: &[SampleFrame], post: &[SampleFrame]) -> Fit {
    let ids = |frames: &[SampleFrame]| -> Vec<u64> {
        frames
            .iter()
            .filter_map(|f| match extract_id(f.link, &f.data, f.orig_len, spec) {
                Extracted::Id(id) => Some(id),
                _ => None,
            })
            .collect()
    };
    let pre_ids = ids(pre);
    let post_set: HashSet<u64> = ids(post).into_iter().collect();
    let pre_set: HashSet<u64> = pre_ids.iter().copied().collect();
    let shared = pre_set.intersection(&post_set).count() as f64 / pre.len().max(1) as f64;
    let steps = pre_ids.windows(2).filter(|w| w[1].wrapping_sub(w[0]) == 1).count();
    let sequential = steps as f64 / pre_ids.len().saturating_sub(1).max(1) as f64;
    Fit { spec: *spec, shared, sequential }
}

/// Try offsets 0..=max_offset, widths 4 and 8, both byte orders; best first.
pub fn best_fits(current: &IdSpec, pre: &[SampleFrame], post: &[SampleFrame], max_offset: usize) -> Vec<Fit> {
    let mut fits = Vec::new();
    for offset in 0..=max_offset {
        for width in [8usize, 4] {
            for endian in [Endian::Big, Endian::Little] {
                let spec = IdSpec { offset, width, endian, udp_dst_port: current.udp_dst_port };
                fits.push(fit(&spec, pre, post));
            }
        }
    }
    fits.sort_by(|a, b| {
        let ka = a.shared + 0.5 * a.sequential;
        let kb = b.shared + 0.5 * b.sequential;
        kb.partial_cmp(&ka).unwrap()
    });
    fits
}

/// Counts of what a sample of frames is, to explain a bad match in words.
#[derive(Debug, Clone, Copy, Default)]
pub struct Census {
    /// Frames in the sample.
    pub frames: usize,
    /// UDP datagrams to the id port.
    pub udp: usize,
    /// UDP datagrams to any port.
    pub udp_any_port: usize,
    /// Datagrams whose id the snap length cut off.
    pub snapped: usize,
}

/// What a sample of frames is, under `spec`.
pub fn census(spec: &IdSpec, frames: &[SampleFrame]) -> Census {
    let any_port = IdSpec { udp_dst_port: None, offset: 0, width: 4, ..*spec };
    let mut c = Census { frames: frames.len(), ..Census::default() };
    for f in frames {
        match extract_id(f.link, &f.data, f.orig_len, spec) {
            Extracted::Id(_) | Extracted::TooShort => c.udp += 1,
            Extracted::Snapped => c.snapped += 1,
            Extracted::NotUdp => {}
        }
        if matches!(extract_id(f.link, &f.data, f.orig_len, &any_port), Extracted::Id(_) | Extracted::TooShort) {
            c.udp_any_port += 1;
        }
    }
    c
}

/// One sentence: the likely cause of a poor match, and what to try.
pub fn explain(current: &IdSpec, pre: &[SampleFrame], post: &[SampleFrame]) -> String {
    let c = census(current, pre);
    if c.frames == 0 {
        return "PRE holds no frames to diagnose".into();
    }
    if c.snapped * 2 > c.frames {
        return "most frames were cut by the capture's snap length before the id: capture with a larger snap length (tcpdump -s 0)".into();
    }
    if c.udp_any_port == 0 {
        return "no UDP frames in PRE: lowtail matches UDP test traffic only".into();
    }
    if c.udp == 0 {
        return "no UDP frame goes to the chosen --udp-port: check the port, or drop the option".into();
    }
    let now = fit(current, pre, post);
    let best = best_fits(current, pre, post, 32);
    if let Some(b) = best.first() {
        if b.shared > now.shared + 0.2 && b.spec != *current {
            let e = match b.spec.endian {
                Endian::Big => "big",
                Endian::Little => "little",
            };
            return format!(
                "ids look like --id-offset {} --id-width {} --id-endian {} ({:.0} % of sampled PRE ids found in POST, against {:.0} % with the options given)",
                b.spec.offset,
                b.spec.width,
                e,
                b.shared * 100.0,
                now.shared * 100.0
            );
        }
    }
    "no id layout explains the sample: are PRE and POST captures of the same traffic and time span?".into()
}
