mod buffer;
mod pool;
mod token;
