//! AF_PACKET sockets bound to one interface, and what the programs need to know about
//! that interface (index, state, MTU) before they start.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::netns::IfaceRef;
use lowtail_program::Fatal;

/// EtherType "every protocol", in network byte order as bind() wants it.
pub const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// A raw packet socket opened in an interface's namespace, not yet bound.
pub struct PacketSocket {
    fd: OwnedFd,
    /// The interface it was opened for.
    pub iface: IfaceRef,
    /// Its index in its namespace.
    pub ifindex: i32,
    /// Its MTU.
    pub mtu: u32,
}

impl PacketSocket {
    /// Open a packet socket in the interface's namespace that receives nothing until
    /// `bind_all` (protocol 0), and check that the interface exists and is up.
    pub fn open(iface: &IfaceRef) -> Result<PacketSocket, Fatal> {
        iface.within(|| {
            // SAFETY: plain socket(2); the descriptor is owned right away.
            let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
            if raw < 0 {
                return Err(Fatal::os("opening a packet socket", io::Error::last_os_error()));
            }
            // SAFETY: `raw` is a fresh descriptor nobody else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let mut req = ifreq(&iface.name);
            ioctl(raw, libc::SIOCGIFINDEX, &mut req).map_err(|e| match e.raw_os_error() {
                Some(libc::ENODEV) => Fatal::usage(format!("no such interface: {}{}", iface.name, iface.where_())),
                _ => Fatal::os(format!("looking up interface {iface}"), e),
            })?;
            // SAFETY: SIOCGIFINDEX filled the ifindex member of the union.
            let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
            let mut req = ifreq(&iface.name);
            ioctl(raw, libc::SIOCGIFFLAGS, &mut req)
                .map_err(|e| Fatal::os(format!("reading the flags of {iface}"), e))?;
            // SAFETY: SIOCGIFFLAGS filled the flags member.
            let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
            if flags & libc::IFF_UP == 0 {
                return Err(Fatal::usage(format!(
                    "interface {}{} is down (bring it up with `ip link set {} up`)",
                    iface.name,
                    iface.where_(),
                    iface.name
                )));
            }
            let mut req = ifreq(&iface.name);
            ioctl(raw, libc::SIOCGIFMTU, &mut req).map_err(|e| Fatal::os(format!("reading the MTU of {iface}"), e))?;
            // SAFETY: SIOCGIFMTU filled the mtu member.
            let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
            Ok(PacketSocket { fd, iface: iface.clone(), ifindex, mtu })
        })
    }

    /// The file descriptor.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Start receiving every protocol on the interface (and fix the interface for sends).
    pub fn bind_all(&self) -> Result<(), Fatal> {
        self.bind(ETH_P_ALL_BE)
    }

    /// Bind to the interface for sending only: protocol 0 receives nothing.
    pub fn bind_send_only(&self) -> Result<(), Fatal> {
        self.bind(0)
    }

    fn bind(&self, protocol_be: u16) -> Result<(), Fatal> {
        // SAFETY: an all-zero sockaddr_ll is valid; the fields that matter are set below.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol_be;
        sll.sll_ifindex = self.ifindex;
        // SAFETY: the address points to a properly sized sockaddr_ll.
        let rc = unsafe {
            libc::bind(self.raw(), &sll as *const _ as *const libc::sockaddr, size_of::<libc::sockaddr_ll>() as u32)
        };
        if rc != 0 {
            return Err(Fatal::os(format!("binding a packet socket to {}", self.iface), io::Error::last_os_error()));
        }
        Ok(())
    }

    /// setsockopt with a value of any plain type.
    pub fn set<T>(&self, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
        // SAFETY: `value` is a valid T of the size we pass.
        let rc = unsafe {
            libc::setsockopt(self.raw(), level, name, value as *const T as *const libc::c_void, size_of::<T>() as u32)
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// getsockopt into a value of any plain type.
    pub fn get<T: Copy>(&self, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
        // SAFETY: the kernel writes at most `len` bytes into a zeroed T (all option
        // structs we read are plain integers).
        let mut value: T = unsafe { zeroed() };
        let mut len = size_of::<T>() as libc::socklen_t;
        let rc =
            unsafe { libc::getsockopt(self.raw(), level, name, &mut value as *mut T as *mut libc::c_void, &mut len) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(value)
    }

    /// An integer SOL_PACKET option.
    pub fn set_packet_opt(&self, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
        self.set(libc::SOL_PACKET, name, &value)
    }

    /// Kernel receive counters since the last call (reading resets them): packets seen by
    /// the socket (dropped ones included), drops, and times the V3 ring froze.
    pub fn take_stats(&self) -> io::Result<libc::tpacket_stats_v3> {
        self.get(libc::SOL_PACKET, libc::PACKET_STATISTICS)
    }

    /// Make a big send buffer so that a fast generator is not put to sleep by socket
    /// memory accounting (SO_SNDBUFFORCE needs CAP_NET_ADMIN; fall back quietly).
    pub fn grow_send_buffer(&self, bytes: i32) {
        if self.set(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &bytes).is_err() {
            let _ = self.set(libc::SOL_SOCKET, libc::SO_SNDBUF, &bytes);
        }
    }

    /// Truncate what the kernel copies per frame to `snaplen` bytes: a classic BPF
    /// program that accepts every frame with that length, as libpcap does.
    pub fn set_snaplen(&self, snaplen: u32) -> io::Result<()> {
        let mut program = [libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: snaplen }];
        let fprog = libc::sock_fprog { len: 1, filter: program.as_mut_ptr() };
        self.set(libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
    }
}

/// An ifreq naming `name` (callers validated its length).
pub fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    req
}

/// An ioctl whose argument is a pointer to `arg`.
pub fn ioctl<T>(fd: RawFd, request: libc::c_ulong, arg: &mut T) -> io::Result<()> {
    // SAFETY: every request we issue takes a pointer to the T we pass.
    if unsafe { libc::ioctl(fd, request as _, arg as *mut T) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
