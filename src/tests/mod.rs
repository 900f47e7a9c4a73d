mod buffer;
mod error;
mod exchange;
mod listen;
mod pool;
mod token;
