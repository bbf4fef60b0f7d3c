// Package caddygw is the gateway as a Caddy plugin: importing it registers
// every Caddy module of the gateway (the gw app, the gw handler and
// directive, admin.api.gw), which is what
//
//	xcaddy build --with github.com/caddy-gw/caddy-gw
//
// does. The modules themselves live in caddymodule.
package caddygw

import _ "github.com/caddy-gw/caddy-gw/caddymodule"
