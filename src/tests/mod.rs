mod buffer;
mod pool;
