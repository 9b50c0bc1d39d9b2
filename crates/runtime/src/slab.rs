//! A slab of values keyed by slot index, its free slots reused: what the pool's scheduler
//! payloads point into (a `u64` key per queued job). Self-contained, so the pool bench's
//! ladder (`benches/pool.rs`) compiles this very file rather than a copy.

/// Values by key, each key a slot index; a freed slot is reused by the next insert.
pub(crate) struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Stores `value` in a free slot (or a new one) and returns its key.
    pub(crate) fn insert(&mut self, value: T) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(value);
                u64::from(i)
            }
            None => {
                self.slots.push(Some(value));
                (self.slots.len() - 1) as u64
            }
        }
    }

    /// Takes the value under `key` out and frees its slot; `None` for an empty or unknown key.
    pub(crate) fn take(&mut self, key: u64) -> Option<T> {
        let value = self.slots.get_mut(key as usize)?.take();
        if value.is_some() {
            self.free.push(key as u32);
        }
        value
    }

    /// The value under `key`, if the slot holds one.
    #[allow(dead_code)] // the bench's copy of this file does not use it
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        self.slots.get_mut(key as usize)?.as_mut()
    }
}
