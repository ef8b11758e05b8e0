//! Kernel counters outside the socket: an interface's packet and drop counts
//! (/proc/net/dev of its namespace) and the per-CPU backlog drops of the whole host
//! (/proc/net/softnet_stat). A veth pair drops silently when the receiving side's
//! backlog is full; these counters make such losses visible and attributable.

use serde::Serialize;

use crate::netns::IfaceRef;

/// An interface's counters from /proc/net/dev.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DevCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Received packets dropped.
    pub rx_dropped: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets dropped on sending.
    pub tx_dropped: u64,
}

impl DevCounters {
    /// The counts between `earlier` and this reading.
    pub fn since(&self, earlier: &DevCounters) -> DevCounters {
        DevCounters {
            rx_packets: self.rx_packets.wrapping_sub(earlier.rx_packets),
            rx_dropped: self.rx_dropped.wrapping_sub(earlier.rx_dropped),
            tx_packets: self.tx_packets.wrapping_sub(earlier.tx_packets),
            tx_dropped: self.tx_dropped.wrapping_sub(earlier.tx_dropped),
        }
    }
}

/// The interface's counters read from inside its namespace (None if unreadable).
pub fn dev_counters(iface: &IfaceRef) -> Option<DevCounters> {
    let text = iface.within(|| Ok(std::fs::read_to_string("/proc/thread-self/net/dev").ok())).ok()??;
    parse_dev(&text, &iface.name)
}

fn parse_dev(text: &str, name: &str) -> Option<DevCounters> {
    for line in text.lines().skip(2) {
        let (dev, rest) = line.split_once(':')?;
        if dev.trim() != name {
            continue;
        }
        let v: Vec<u64> = rest.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        if v.len() < 12 {
            return None;
        }
        return Some(DevCounters { rx_packets: v[1], rx_dropped: v[3], tx_packets: v[9], tx_dropped: v[11] });
    }
    None
}

/// Frames dropped because a CPU's input backlog was full, summed over all CPUs.
pub fn softnet_dropped() -> Option<u64> {
    parse_softnet(&std::fs::read_to_string("/proc/net/softnet_stat").ok()?)
}

fn parse_softnet(text: &str) -> Option<u64> {
    let mut total = 0u64;
    for line in text.lines() {
        let dropped = line.split_whitespace().nth(1)?;
        total += u64::from_str_radix(dropped, 16).ok()?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n\
            lt-a0: 6000 100 0 7 0 0 0 0 9000 150 0 3 0 0 0 0\n";
        assert_eq!(
            parse_dev(text, "lt-a0"),
            Some(DevCounters { rx_packets: 100, rx_dropped: 7, tx_packets: 150, tx_dropped: 3 })
        );
        assert_eq!(parse_dev(text, "eth9"), None);
    }

    #[test]
    fn sums_backlog_drops_over_cpus() {
        let text = "0000a000 00000010 00000000 00000000\n0000b000 00000002 00000001 00000000\n";
        assert_eq!(parse_softnet(text), Some(18));
    }
}
