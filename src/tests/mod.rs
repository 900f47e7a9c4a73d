mod buffer;
mod error;
mod exchange;
mod pool;
mod pool_choice;
mod token;
