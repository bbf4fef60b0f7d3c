module github.com/caddy-gw/caddy-gw

go 1.26
