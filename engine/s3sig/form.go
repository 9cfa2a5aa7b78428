package s3sig

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// POST object: a browser uploads a file with an HTML form, a
// multipart/form-data body whose fields (key, policy, signature, acl,
// x-amz-meta-*, ...) precede the file. S3 reads the fields up to the file
// and ignores what follows it. ReadForm does the same, streaming: the
// fields are read into memory, bounded, and the file is left unread for
// the caller to stream.

// FormLimits bound what ReadForm holds in memory.
type FormLimits struct {
	// MaxFieldsBytes bounds the fields' values together (default 64
	// KiB). The bytes read before the file, part headers and boundaries
	// included, are bounded by twice this plus 8 KiB.
	MaxFieldsBytes int64
	// MaxFieldBytes bounds one field's value (default 20 KiB, S3's
	// bound on a form's policy and fields).
	MaxFieldBytes int64
}

func (l FormLimits) fields() int64 {
	if l.MaxFieldsBytes <= 0 {
		return 64 << 10
	}
	return l.MaxFieldsBytes
}

func (l FormLimits) field() int64 {
	if l.MaxFieldBytes <= 0 {
		return 20 << 10
	}
	return l.MaxFieldBytes
}

// FormFields are a form's fields by lower-case name: S3 matches field
// names without regard to case.
type FormFields map[string]string

// Get is the field named name (any case), "" when absent.
func (f FormFields) Get(name string) string { return f[strings.ToLower(name)] }

// Has reports whether the form has a field named name (any case).
func (f FormFields) Has(name string) bool {
	_, ok := f[strings.ToLower(name)]
	return ok
}

// Form is a POST object form read up to its file.
type Form struct {
	// Fields are the fields before the file (the first of a repeated
	// name). A key's ${filename} is already replaced by the file's name,
	// as S3 does before it checks the policy.
	Fields FormFields
	// File reads the file part's content and ends where the part ends.
	File io.Reader
	// FileName is the file's name as sent, without a directory.
	FileName string
	// FileContentType is the file part's Content-Type, if any.
	FileContentType string

	names []string // field names in the order sent, lower case
}

// ReadForm reads a multipart/form-data body's fields up to its file part:
// the part named "file". Other parts are fields even when they carry a
// filename (HTML forms do not, but clients such as Python's requests
// send every field so). The file's bytes are not read: Form.File streams
// them. A body with no file part is refused, as S3 refuses it.
func ReadForm(body io.Reader, boundary string, limits FormLimits) (*Form, error) {
	budget := &budgetReader{r: body, left: 2*limits.fields() + 8<<10}
	mr := multipart.NewReader(budget, boundary)
	f := &Form{Fields: FormFields{}}
	var total int64
	for parts := 0; ; parts++ {
		part, err := mr.NextRawPart()
		switch {
		case budget.spent():
			return nil, s3err.MaxPostPreDataLengthExceeded
		case errors.Is(err, io.EOF) && parts == 0:
			// Not even a field: not a form (multipart reads a body without
			// any boundary as an empty one).
			return nil, s3err.MalformedPOSTRequest
		case errors.Is(err, io.EOF):
			return nil, s3err.InvalidArgumentNamed("POST requires exactly one file upload per request.", "file", "0")
		case err != nil:
			return nil, s3err.MalformedPOSTRequest.Because(err)
		}
		_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err != nil {
			return nil, s3err.MalformedPOSTRequest.Because(err)
		}
		name := strings.ToLower(params["name"])
		if name == "file" {
			budget.lift()
			f.File = &formFile{part: part}
			f.FileName = baseName(params["filename"])
			f.FileContentType = part.Header.Get("Content-Type")
			if key, ok := f.Fields["key"]; ok && f.FileName != "" {
				f.Fields["key"] = strings.ReplaceAll(key, "${filename}", f.FileName)
			}
			return f, nil
		}
		value, err := io.ReadAll(io.LimitReader(part, limits.field()+1))
		switch {
		case budget.spent():
			return nil, s3err.MaxPostPreDataLengthExceeded
		case err != nil:
			return nil, s3err.MalformedPOSTRequest.Because(err)
		case int64(len(value)) > limits.field():
			return nil, s3err.MaxPostPreDataLengthExceeded.Withf("The form field %q is too large.", name)
		}
		if total += int64(len(value)); total > limits.fields() {
			return nil, s3err.MaxPostPreDataLengthExceeded
		}
		if _, seen := f.Fields[name]; !seen && name != "" {
			f.Fields[name] = string(value)
			f.names = append(f.names, name)
		}
	}
}

// baseName is a file name without the directory some browsers send
// (C:\dir\f.txt, dir/f.txt).
func baseName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		return name[i+1:]
	}
	return name
}

// formFile reads the file part, a body cut short being IncompleteBody.
type formFile struct{ part *multipart.Part }

func (f *formFile) Read(b []byte) (int, error) {
	n, err := f.part.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		err = errShortBody(err)
	}
	return n, err
}

// budgetReader reads at most left bytes until lifted: the fields before
// a form's file cannot make us read (and multipart buffer) more.
type budgetReader struct {
	r      io.Reader
	left   int64
	lifted bool
	over   bool
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.lifted {
		return b.r.Read(p)
	}
	if b.left <= 0 {
		b.over = true
		return 0, errBudget
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// errBudget stops multipart's reading when the budget is spent; it is
// never returned to callers (MaxPostPreDataLengthExceeded is).
var errBudget = errors.New("s3sig: form fields over budget")

func (b *budgetReader) spent() bool { return b.over }
func (b *budgetReader) lift()       { b.lifted = true }
