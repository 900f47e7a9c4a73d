mod buffer;
mod error;
mod exchange;
mod pool;
mod token;
