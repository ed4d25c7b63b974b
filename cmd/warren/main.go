package main

import "github.com/warrenmq/broker/internal/server"

func main() { server.Main() }
