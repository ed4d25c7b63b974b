// Package erlterm prints values as RabbitMQ's validation texts print the
// Erlang term it decoded from the same JSON (io_lib's ~p), and holds the
// error those texts make up (rabbit_runtime_parameters:format_error).
//
// It promises one printer for the packages that copy RabbitMQ's texts
// (internal/policy, internal/federation): strings as binaries, null as
// the atom null, objects as maps with their keys sorted, lists as lists.
// Numbers keep their JSON form: a json.Number as written (an integer, or
// a float with a point or exponent), Go integers as integers. A float64
// prints as a float (Format), or, for values that may come from a decoder
// without UseNumber, as the integer JSON most likely held when it is
// integral (FormatLoose). It imports nothing of the broker.
package erlterm
