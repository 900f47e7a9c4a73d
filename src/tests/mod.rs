mod buffer;
mod error;
mod exchange;
mod listen;
mod pool;
mod pool_choice;
mod stamp;
mod token;
