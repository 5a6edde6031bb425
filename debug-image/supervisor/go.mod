module breakglass/debug-image/supervisor

go 1.23
