// Package sqlstore holds what persistence/postgres and persistence/sqlite
// do alike whatever the database: the checks of their arguments and
// Config, the JSON of a quality window, the units of a source as recorded,
// the chunked loop of PruneDedupe. It speaks no SQL, holds no state and
// starts no goroutines; each store wraps the errors it returns with its
// own words.
package sqlstore
