package amqp

//go:generate go run ../internal/gen -o spec.go
