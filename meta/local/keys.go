package local

// kindVersion keys the store's format version ("m!"), beside the entity
// kinds of meta/internal/metakey, whose key layout this store uses.
const kindVersion = '!'
