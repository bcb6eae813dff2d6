// The differential test's Go side (tests/it/go_url.rs): Go's own net/url, nothing else.
module eks-nodeinit.test/urlparse

go 1.26
