package console

import (
	"embed"
	"net/http"
)

// The page is three files, served as they are: no build step, no
// third-party script, nothing inline (the Content-Security-Policy allows
// only the console's own files).
//
//go:embed ui/index.html ui/app.js ui/app.css
var ui embed.FS

func staticFile(name, contentType string) http.HandlerFunc {
	body, err := ui.ReadFile("ui/" + name)
	if err != nil {
		panic(err) // embedded at build time: missing is a build defect
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(body)
	}
}
