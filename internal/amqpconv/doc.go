// Package amqpconv converts between the broker's AMQP types (package amqp)
// and amqp091-go's, the types of the direct Channel and the introspection
// API: field tables, and message properties in both directions. Each
// mapping is written here once; Publishing is the one from decoded
// properties to amqp091-go's names and types, and Delivery and Return
// repackage it.
//
// Every function is pure and safe for concurrent use.
package amqpconv
