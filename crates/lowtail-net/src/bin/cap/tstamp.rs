//! Which timestamps an interface can give, and switching the NIC's receive stamping on.
//!
//! ETHTOOL_GET_TS_INFO says whether the driver stamps received frames with the NIC's
//! clock (SOF_TIMESTAMPING_RAW_HARDWARE for all frames: HWTSTAMP_FILTER_ALL).
//! SIOCSHWTSTAMP turns it on; the previous configuration is put back when the guard
//! is dropped, so the NIC is left as it was found (PTP daemons may rely on it).

use std::io;
use std::mem::zeroed;

use lowtail_net::socket::{ifreq, ioctl, PacketSocket};

const ETHTOOL_GET_TS_INFO: u32 = 0x41;

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// What the driver reports about timestamping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsInfo {
    /// SOF_TIMESTAMPING_* capabilities.
    pub so_timestamping: u32,
    /// The PTP hardware clock, -1 if none.
    pub phc_index: i32,
    /// Bit mask of the HWTSTAMP_FILTER_* the NIC offers.
    pub rx_filters: u32,
}

impl TsInfo {
    /// The NIC can stamp every received frame with its own clock.
    pub fn hardware_rx(&self) -> bool {
        let needed = libc::SOF_TIMESTAMPING_RAW_HARDWARE | libc::SOF_TIMESTAMPING_RX_HARDWARE;
        self.so_timestamping & needed == needed && self.rx_filters & (1 << libc::HWTSTAMP_FILTER_ALL) != 0
    }
}

/// Ask the driver (None when it does not answer: no ethtool support).
pub fn ts_info(sock: &PacketSocket) -> Option<TsInfo> {
    let mut info = EthtoolTsInfo { cmd: ETHTOOL_GET_TS_INFO, ..Default::default() };
    let mut req = ifreq(&sock.iface.name);
    req.ifr_ifru.ifru_data = &mut info as *mut EthtoolTsInfo as *mut libc::c_char;
    ioctl(sock.raw(), libc::SIOCETHTOOL, &mut req).ok()?;
    Some(TsInfo { so_timestamping: info.so_timestamping, phc_index: info.phc_index, rx_filters: info.rx_filters })
}

/// Hardware receive stamping switched on; dropping it restores what was there before.
pub struct HwStamping {
    fd: libc::c_int,
    name: String,
    previous: Option<libc::hwtstamp_config>,
}

/// Make the NIC stamp every received frame.
pub fn enable_hardware_rx(sock: &PacketSocket) -> io::Result<HwStamping> {
    let previous = hw_config(sock.raw(), &sock.iface.name, libc::SIOCGHWTSTAMP, None).ok();
    // SAFETY: all-zero is a valid hwtstamp_config.
    let mut want: libc::hwtstamp_config = unsafe { zeroed() };
    want.tx_type = previous.map_or(libc::HWTSTAMP_TX_OFF as libc::c_int, |p| p.tx_type);
    want.rx_filter = libc::HWTSTAMP_FILTER_ALL as libc::c_int;
    hw_config(sock.raw(), &sock.iface.name, libc::SIOCSHWTSTAMP, Some(want))?;
    // SAFETY: dup of a valid descriptor, so the guard can outlive borrow rules.
    let fd = unsafe { libc::dup(sock.raw()) };
    Ok(HwStamping { fd, name: sock.iface.name.clone(), previous })
}

fn hw_config(
    fd: libc::c_int,
    name: &str,
    request: libc::c_ulong,
    value: Option<libc::hwtstamp_config>,
) -> io::Result<libc::hwtstamp_config> {
    // SAFETY: all-zero is a valid hwtstamp_config.
    let mut cfg: libc::hwtstamp_config = value.unwrap_or(unsafe { zeroed() });
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_data = &mut cfg as *mut libc::hwtstamp_config as *mut libc::c_char;
    ioctl(fd, request, &mut req)?;
    Ok(cfg)
}

impl Drop for HwStamping {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            let _ = hw_config(self.fd, &self.name, libc::SIOCSHWTSTAMP, Some(previous));
        }
        // SAFETY: closing the descriptor `enable_hardware_rx` duplicated.
        unsafe { libc::close(self.fd) };
    }
}
