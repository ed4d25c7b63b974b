// Package rabbitconf reads RabbitMQ's rabbitmq.conf format (the
// sysctl-like "key = value" lines of RabbitMQ 3.7 and later, as 4.x
// documents it: one setting a line, "#" starts a comment, blank lines
// ignored) and applies it through a Table of known keys.
//
// It promises that every line is either applied by a registered handler
// or reported with its line number: Parse refuses a line that is not
// "key = value", Table.Apply hands a key no handler claims to the caller's
// unknown function (which refuses or warns). A package registers a single
// key with Table.Key or a whole group with Table.Prefix (for example
// "auth_backends."), so groups such as the auth_* keys can be added by the
// package that implements them.
package rabbitconf
