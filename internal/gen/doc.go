// Command gen writes amqp/spec.go from the AMQP 0-9-1 specification XML
// (RabbitMQ's extended edition, kept next to this file).
//
// Usage, from the module root:
//
//	go run ./internal/gen                  # reads internal/gen/amqp0-9-1.extended.xml, writes amqp/spec.go
//
// or through `go generate ./amqp`, which runs `go run ../internal/gen -o spec.go` in amqp/.
// -o - writes to standard output. The output is gofmt'ed; a test in this package
// regenerates it in memory and compares it byte for byte with the committed file.
//
// The generator reads the spec's constants (frame types and sizes, reply codes with
// their hard/soft class), class ids, and every method with its fields, and writes for
// each method a struct named Class+Method in CamelCase ("basic.get-ok" -> BasicGetOk)
// whose fields are the XML field names in CamelCase ("reserved-1" -> Reserved1), with
// its ids, name, content and synchronous flags, an append-style encoder, a decoder
// over []byte (no reflection), and a statically dispatched frame appender. The primitive codecs the generated code calls
// live in amqp/codec.go. It is a build tool: nothing imports it, nothing runs it
// concurrently.
package main
