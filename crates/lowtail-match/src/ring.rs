//! The matcher's FIFOs: rings addressed by absolute position, in memory that grows in
//! place.
//!
//! At 1 Mpps and a 10 s horizon the PRE ring holds 10 million entries (384 MiB once
//! grown). Every page of it is zeroed by the kernel the first time it is touched, and on
//! this project's VMs that first touch is the dearest part of the memory: growing by
//! allocating a ring twice as large and copying into it touched every size on the way
//! (twice the final size) and was a fifth of a 20-million-packet analysis's CPU time. So
//! the slots live in an anonymous mapping that `mremap` enlarges: pages already used keep
//! their place in the page tables, only the new half is fresh, and the final size is the
//! only memory ever faulted in.

/// Types whose all-zero bit pattern is their `Default` value, so that a ring of them can
/// start as memory the kernel zeroes lazily, page by page as slots are first used.
///
/// # Safety
/// Every field must be an integer (or another `ZeroDefault`): all zero bytes is a valid
/// value, equal to `Default::default()`.
pub(crate) unsafe trait ZeroDefault: Copy + Default {}

// SAFETY: an integer.
unsafe impl ZeroDefault for u64 {}

/// A FIFO addressed by absolute position (PRE entries by PRE index, arrivals by
/// arrival number), in a power-of-two ring: `index & mask` finds a slot with no
/// division and no wrap-around branch.
#[derive(Debug)]
pub(crate) struct Ring<T: ZeroDefault> {
    slots: Slots<T>,
    mask: u64,
    /// Index of the oldest entry held.
    pub(crate) base: u64,
    /// Index the next entry gets.
    pub(crate) next: u64,
}

const FIRST_CAPACITY: usize = 1024;

impl<T: ZeroDefault> Ring<T> {
    pub(crate) fn new() -> Ring<T> {
        Ring { slots: Slots::zeroed(FIRST_CAPACITY), mask: FIRST_CAPACITY as u64 - 1, base: 0, next: 0 }
    }

    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.next - self.base
    }

    /// The bytes of its slots (the mapping's size).
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<T>()
    }

    #[inline]
    pub(crate) fn contains(&self, index: u64) -> bool {
        index.wrapping_sub(self.base) < self.len()
    }

    #[inline]
    pub(crate) fn get(&self, index: u64) -> &T {
        // SAFETY: `mask + 1` is the number of slots (a power of two, `new` and `grow`
        // keep it so), so `index & mask` is always a slot: no bounds check on the per-packet path.
        unsafe { &*self.slots.as_ptr().add((index & self.mask) as usize) }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, index: u64) -> &mut T {
        // SAFETY: as in `get`; `&mut self` makes the access unique.
        unsafe { &mut *self.slots.as_mut_ptr().add((index & self.mask) as usize) }
    }

    #[inline]
    pub(crate) fn front(&self) -> Option<&T> {
        (self.next > self.base).then(|| self.get(self.base))
    }

    #[inline]
    pub(crate) fn push(&mut self, e: T) {
        if self.len() == self.slots.len() as u64 {
            self.grow();
        }
        let next = self.next;
        *self.get_mut(next) = e;
        self.next += 1;
    }

    /// Twice the slots. An entry keeps its slot unless the new mask's top bit is set in
    /// its index: then it moves up by the old capacity, into the new (still untouched) half.
    #[cold]
    fn grow(&mut self) {
        let old = self.slots.len();
        self.slots.grow_to(old * 2);
        let mask = (old * 2) as u64 - 1;
        let slots = self.slots.as_mut_slice();
        for i in self.base..self.next {
            let (from, to) = ((i & self.mask) as usize, (i & mask) as usize);
            if from != to {
                slots[to] = slots[from];
            }
        }
        self.mask = mask;
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> (u64, T) {
        let index = self.base;
        self.base += 1;
        (index, *self.get(index))
    }
}

#[cfg(target_os = "linux")]
use mapped::Slots;
#[cfg(not(target_os = "linux"))]
use portable::Slots;

#[cfg(target_os = "linux")]
mod mapped {
    use std::marker::PhantomData;
    use std::ptr::NonNull;

    use super::ZeroDefault;

    /// `len` values of `T` in an anonymous private mapping: zero pages until written.
    #[derive(Debug)]
    pub(crate) struct Slots<T: ZeroDefault> {
        ptr: NonNull<T>,
        len: usize,
        _owns: PhantomData<T>,
    }

    // SAFETY: the mapping is owned by this value alone (like a Box<[T]>).
    unsafe impl<T: ZeroDefault + Send> Send for Slots<T> {}
    // SAFETY: shared access only reads, as through a &[T].
    unsafe impl<T: ZeroDefault + Sync> Sync for Slots<T> {}

    fn bytes_for<T>(len: usize) -> usize {
        std::mem::size_of::<T>().checked_mul(len).filter(|&b| b > 0).expect("ring size overflows")
    }

    impl<T: ZeroDefault> Slots<T> {
        pub(crate) fn zeroed(len: usize) -> Self {
            let bytes = bytes_for::<T>(len);
            // SAFETY: a fresh anonymous mapping, no address hint; failure is checked.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            let slots = Slots { ptr: Self::mapped(ptr, bytes), len, _owns: PhantomData };
            slots.advise_huge_pages();
            slots
        }

        fn mapped(ptr: *mut libc::c_void, bytes: usize) -> NonNull<T> {
            if ptr == libc::MAP_FAILED {
                let layout = std::alloc::Layout::from_size_align(bytes, std::mem::align_of::<T>()).expect("layout");
                std::alloc::handle_alloc_error(layout);
            }
            // Page-aligned, so aligned for any T of the rings.
            NonNull::new(ptr as *mut T).expect("mmap returns a non-null address")
        }

        /// `len` values; those beyond the old length are zero, the others keep theirs
        /// (their pages are moved, not copied).
        pub(crate) fn grow_to(&mut self, len: usize) {
            let (old, new) = (bytes_for::<T>(self.len), bytes_for::<T>(len));
            // SAFETY: the mapping this value owns, with its exact size; MAYMOVE lets the
            // kernel place it elsewhere, and the old address is not used again.
            let ptr = unsafe { libc::mremap(self.ptr.as_ptr() as *mut libc::c_void, old, new, libc::MREMAP_MAYMOVE) };
            self.ptr = Self::mapped(ptr, new);
            self.len = len;
            self.advise_huge_pages();
        }

        /// 2 MiB pages where the kernel has them: a 384 MiB ring in 4 KiB pages costs a
        /// fault every 170 entries. A kernel without transparent huge pages ignores it.
        fn advise_huge_pages(&self) {
            // SAFETY: advice on the mapping this value owns; it changes how the pages are
            // backed, never their contents.
            unsafe {
                libc::madvise(self.ptr.as_ptr() as *mut libc::c_void, bytes_for::<T>(self.len), libc::MADV_HUGEPAGE)
            };
        }

        #[inline]
        pub(crate) fn len(&self) -> usize {
            self.len
        }

        #[inline]
        pub(crate) fn as_ptr(&self) -> *const T {
            self.ptr.as_ptr()
        }

        #[inline]
        pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
            self.ptr.as_ptr()
        }

        #[inline]
        pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
            // SAFETY: `len` initialised values (zero pages are valid `T`: ZeroDefault), and
            // `&mut self` makes the access unique.
            unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
        }
    }

    impl<T: ZeroDefault> Drop for Slots<T> {
        fn drop(&mut self) {
            // SAFETY: the mapping this value owns, unmapped once.
            unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, bytes_for::<T>(self.len)) };
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod portable {
    use super::ZeroDefault;

    /// Elsewhere: a vector, copied when it grows.
    #[derive(Debug)]
    pub(crate) struct Slots<T: ZeroDefault>(Vec<T>);

    impl<T: ZeroDefault> Slots<T> {
        pub(crate) fn zeroed(len: usize) -> Self {
            Slots(vec![T::default(); len])
        }

        pub(crate) fn grow_to(&mut self, len: usize) {
            self.0.resize(len, T::default());
        }

        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }

        pub(crate) fn as_ptr(&self) -> *const T {
            self.0.as_ptr()
        }

        pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
            self.0.as_mut_ptr()
        }

        pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
            &mut self.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the mix of pushes and pops, the ring holds what a VecDeque holds, across
    /// every growth (entries that wrapped around included).
    #[test]
    fn growing_keeps_every_entry_at_its_index() {
        let mut ring: Ring<u64> = Ring::new();
        let mut model = std::collections::VecDeque::new();
        let mut value = 7u64;
        for round in 0..40_000u64 {
            // pushes outpace pops, in bursts, so the ring wraps before each growth
            for _ in 0..(round % 7) {
                value = value.wrapping_mul(6364136223846793005).wrapping_add(1);
                ring.push(value);
                model.push_back(value);
            }
            if round % 3 != 0 {
                if let Some(expected) = model.pop_front() {
                    assert_eq!(ring.pop().1, expected);
                }
            }
        }
        assert!(ring.len() > 4 * FIRST_CAPACITY as u64, "the test grows the ring several times");
        for (offset, expected) in model.iter().enumerate() {
            assert_eq!(ring.get(ring.base + offset as u64), expected);
        }
    }
}
