package regionconfig

import "errors"

// Sentinels for the ways a region-server configuration can be unusable. Every
// error Parse and Load return wraps one of them and is also marked
// failure.Permanent: a broken configuration file does not mend itself between
// two attempts of the same run.
var (
	// ErrRead means the file could not be read at all: missing, not a
	// regular file, permission denied, or larger than the size limit. The
	// underlying os error is wrapped too, so errors.Is(err, fs.ErrNotExist)
	// works.
	ErrRead = errors.New("cannot read configuration")
	// ErrSyntax means the text is not an INI file RawConfigParser would
	// accept: a line without "=" or ":", an unclosed section header, bytes
	// that are not UTF-8.
	ErrSyntax = errors.New("not a valid INI file")
	// ErrMissingKey means a required section or key is absent or empty.
	ErrMissingKey = errors.New("required key missing or empty")
	// ErrDuplicateKey means a key is given twice with different values;
	// RawConfigParser refuses such a file, and guessing which one the
	// administrator meant would pin the wrong certificate.
	ErrDuplicateKey = errors.New("key given more than once")
	// ErrInvalidRegionServer means a regionsrv entry is neither an IPv4
	// address, an IPv6 address without brackets, nor a host name.
	ErrInvalidRegionServer = errors.New("not a usable region server")
	// ErrInsecureMetadataServer means metadata_server is an http URL. Its
	// answer replaces the pinned region servers' (update server name,
	// address and certificate fingerprint), so it is only taken over TLS.
	ErrInsecureMetadataServer = errors.New("metadata server must be an https URL")
)
