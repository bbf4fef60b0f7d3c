// Package caddymodule registers every Caddy module of the gateway. Importing
// it (as xcaddy's `--with` does) is all a Caddy build needs.
package caddymodule
