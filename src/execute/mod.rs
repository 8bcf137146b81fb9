//! The pieces of one `execute_code` request around its run in the sandbox: the request and
//! its checks ([`request`]), what sandbox code may call on the server ([`calls`]), progress
//! reports while it runs ([`progress`]), and what it returns besides text ([`produced`]:
//! pictures made safe by [`pictures`], resource links, the files it created or changed).
//! `App::execute` puts them together.

pub mod calls;
pub mod pictures;
pub mod produced;
pub mod progress;
pub mod request;
