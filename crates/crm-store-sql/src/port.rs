//! The forwarding impls of the ports whose statements live here.
//!
//! A port trait is crm-app's and a `Tx` type is its store's, so the orphan rule keeps
//! `impl Port for Tx` out of this crate: each store writes it, and [`port_impl!`] writes it for
//! them, each listed method calling the shared function of the same name, followed by whatever
//! methods the store writes itself (the statements that differ).

/// `impl $trait for $tx` (under `async_trait`): each listed method forwards to
/// `crm_store_sql::$module::$name(self, args..)`; the tokens in the last brackets are the
/// store's own methods.
#[doc(hidden)]
#[macro_export]
macro_rules! port_impl {
    ($trait:path, $tx:ty, $module:ident,
     [$(fn $name:ident($($arg:ident: $argty:ty),*) -> $ret:ty;)*],
     [$($own:tt)*]) => {
        #[$crate::reexport::async_trait]
        impl $trait for $tx {
            $(
                async fn $name(&mut self, $($arg: $argty),*) -> $ret {
                    $crate::$module::$name(self, $($arg),*).await
                }
            )*
            $($own)*
        }
    };
}
