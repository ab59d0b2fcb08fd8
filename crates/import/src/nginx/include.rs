//! Reading a configuration: the main file, then every `include` replaced in place by the
//! directives of the files it names (relative paths against nginx's prefix, globs sorted as
//! glob(3) sorts them). A missing file or an unreadable one is noted and left out, as a
//! configuration copied from another machine often names files that are not here; a cycle is an
//! error.

use super::glob;
use super::parser::parse;
use super::{Conf, Directive, IncludeNote, Pos};
use crate::error::{ImportError, SyntaxError};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Deepest chain of includes followed.
pub const MAX_INCLUDE_DEPTH: usize = 16;
/// Most files one include pattern may expand to.
const MAX_GLOB_FILES: usize = 4096;

/// Where configuration files come from: the file system, or memory (tests, fuzzing).
pub trait Source {
    /// The file's text (invalid UTF-8 replaced).
    fn read(&self, path: &Path) -> std::io::Result<String>;
    /// The names in a directory.
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>>;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsSource;

impl Source for FsSource {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        Ok(String::from_utf8_lossy(&std::fs::read(path)?).into_owned())
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
}

/// Files held in memory, by path.
#[derive(Debug, Default, Clone)]
pub struct MemSource {
    /// Path → text.
    pub files: BTreeMap<PathBuf, String>,
}

impl MemSource {
    /// A source holding `files`.
    pub fn new<P: Into<PathBuf>, T: Into<String>>(files: impl IntoIterator<Item = (P, T)>) -> Self {
        Self {
            files: files.into_iter().map(|(p, t)| (p.into(), t.into())).collect(),
        }
    }
}

impl Source for MemSource {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        let mut names: Vec<String> = self
            .files
            .keys()
            .filter_map(|p| p.strip_prefix(dir).ok())
            .filter_map(|rest| rest.components().next())
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        names.dedup();
        Ok(names)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.files.keys().any(|p| p != path && p.starts_with(path))
    }
}

/// Reads `file` and everything it includes; relative include paths resolve against `prefix`.
pub fn load(source: &dyn Source, file: &Path, prefix: &Path) -> Result<Conf, ImportError> {
    let text = source.read(file).map_err(|e| ImportError::Read {
        file: file.display().to_string(),
        source: e,
    })?;
    let mut conf = Conf {
        files: vec![file.to_path_buf()],
        ..Conf::default()
    };
    let top = parse(&text, 0).map_err(|e| syntax(&conf, 0, e.line, e.col, e.what))?;
    let mut loader = Loader {
        source,
        prefix,
        stack: vec![file.to_path_buf()],
    };
    conf.directives = loader.expand(&mut conf, top)?;
    Ok(conf)
}

fn syntax(conf: &Conf, file: usize, line: u32, col: u32, what: SyntaxError) -> ImportError {
    ImportError::Syntax {
        file: conf.files.get(file).map_or("?".into(), |p| p.display().to_string()),
        line,
        col,
        what,
    }
}

struct Loader<'a> {
    source: &'a dyn Source,
    prefix: &'a Path,
    /// Files being read, outermost first (cycle detection).
    stack: Vec<PathBuf>,
}

impl Loader<'_> {
    fn expand(&mut self, conf: &mut Conf, directives: Vec<Directive>) -> Result<Vec<Directive>, ImportError> {
        let mut out = Vec::with_capacity(directives.len());
        for mut d in directives {
            if d.name == "include" && d.block.is_none() {
                out.extend(self.include(conf, &d)?);
                continue;
            }
            if let Some(block) = d.block.take() {
                d.block = Some(self.expand(conf, block)?);
            }
            out.push(d);
        }
        Ok(out)
    }

    fn note(conf: &mut Conf, at: Pos, why: String) {
        conf.notes.push(IncludeNote { at, why });
    }

    fn include(&mut self, conf: &mut Conf, d: &Directive) -> Result<Vec<Directive>, ImportError> {
        let [arg] = d.args.as_slice() else {
            Self::note(conf, d.at, "takes exactly one file or pattern".into());
            return Ok(Vec::new());
        };
        if arg.has_variable() {
            Self::note(conf, d.at, "a path with variables cannot be followed".into());
            return Ok(Vec::new());
        }
        let pattern = self.prefix.join(&arg.text);
        let files = if glob::is_pattern(&arg.text) {
            let found = self.glob(&pattern);
            if found.is_empty() {
                // nginx accepts a pattern that matches nothing; so do we, silently.
                return Ok(Vec::new());
            }
            found
        } else {
            vec![pattern]
        };
        let mut out = Vec::new();
        for path in files {
            if self.stack.contains(&path) {
                return Err(syntax(
                    conf,
                    d.at.file,
                    d.at.line,
                    d.at.col,
                    SyntaxError::IncludeCycle(path.display().to_string()),
                ));
            }
            if self.stack.len() >= MAX_INCLUDE_DEPTH {
                return Err(syntax(
                    conf,
                    d.at.file,
                    d.at.line,
                    d.at.col,
                    SyntaxError::IncludeTooDeep(MAX_INCLUDE_DEPTH),
                ));
            }
            let text = match self.source.read(&path) {
                Ok(t) => t,
                Err(e) => {
                    Self::note(
                        conf,
                        d.at,
                        format!("cannot read {}: {e}; its directives are not translated", path.display()),
                    );
                    continue;
                }
            };
            let index = match conf.files.iter().position(|f| *f == path) {
                Some(i) => i,
                None => {
                    conf.files.push(path.clone());
                    conf.files.len() - 1
                }
            };
            let parsed = parse(&text, index).map_err(|e| syntax(conf, index, e.line, e.col, e.what))?;
            self.stack.push(path);
            let expanded = self.expand(conf, parsed);
            self.stack.pop();
            out.extend(expanded?);
        }
        Ok(out)
    }

    /// Files matching `pattern` (globs in any component), sorted.
    fn glob(&self, pattern: &Path) -> Vec<PathBuf> {
        let mut current: Vec<PathBuf> = vec![PathBuf::new()];
        let components: Vec<Component<'_>> = pattern.components().collect();
        for (i, c) in components.iter().enumerate() {
            let last = i + 1 == components.len();
            let mut next = Vec::new();
            match c {
                Component::Normal(name) if glob::is_pattern(&name.to_string_lossy()) => {
                    let pat = name.to_string_lossy();
                    for dir in &current {
                        let Ok(mut names) = self.source.list(if dir.as_os_str().is_empty() {
                            Path::new(".")
                        } else {
                            dir
                        }) else {
                            continue;
                        };
                        names.sort();
                        for n in names.iter().filter(|n| glob::matches(&pat, n)) {
                            let p = dir.join(n);
                            if last != self.source.is_dir(&p) && next.len() < MAX_GLOB_FILES {
                                next.push(p);
                            }
                        }
                    }
                }
                other => next = current.iter().map(|d| d.join(other.as_os_str())).collect(),
            }
            current = next;
            if current.is_empty() {
                break;
            }
        }
        current.sort();
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(d: &[Directive]) -> Vec<String> {
        d.iter().map(|d| d.name.clone()).collect()
    }

    #[test]
    fn includes_expand_in_place_with_globs_sorted() {
        let src = MemSource::new([
            (
                "/etc/nginx/nginx.conf",
                "http {\n include conf.d/*.conf;\n include /etc/nginx/sites/b;\n}\n",
            ),
            ("/etc/nginx/conf.d/b.conf", "two;"),
            ("/etc/nginx/conf.d/a.conf", "one;"),
            ("/etc/nginx/conf.d/c.txt", "never;"),
            ("/etc/nginx/sites/b", "server { include snippets/x.conf; }"),
            ("/etc/nginx/snippets/x.conf", "\n\nssl_certificate a.pem;"),
        ]);
        let conf = load(&src, Path::new("/etc/nginx/nginx.conf"), Path::new("/etc/nginx")).unwrap();
        let http = conf.directives[0].children();
        assert_eq!(names(http), ["one", "two", "server"]);
        let cert = &http[2].children()[0];
        assert_eq!(cert.name, "ssl_certificate");
        assert_eq!(conf.place(cert.at), "/etc/nginx/snippets/x.conf:3");
        assert!(conf.notes.is_empty());
    }

    #[test]
    fn missing_files_are_noted_and_cycles_refused() {
        let src = MemSource::new([("/c/main.conf", "include missing.conf;\ninclude none/*.conf;\n")]);
        let conf = load(&src, Path::new("/c/main.conf"), Path::new("/c")).unwrap();
        assert_eq!(conf.notes.len(), 1);
        assert!(conf.notes[0].why.contains("/c/missing.conf"), "{:?}", conf.notes);

        let src = MemSource::new([
            ("/c/main.conf", "include a.conf;"),
            ("/c/a.conf", "\ninclude main.conf;"),
        ]);
        let e = load(&src, Path::new("/c/main.conf"), Path::new("/c")).unwrap_err();
        assert!(e.is_syntax());
        assert!(e.to_string().starts_with("/c/a.conf:2:1: include cycle"), "{e}");
    }

    #[test]
    fn syntax_errors_name_the_included_file() {
        let src = MemSource::new([("/c/main.conf", "include a.conf;"), ("/c/a.conf", "server {\n")]);
        let e = load(&src, Path::new("/c/main.conf"), Path::new("/c")).unwrap_err();
        assert_eq!(e.to_string(), "/c/a.conf:2:1: unexpected end of file, expecting \"}\"");
    }
}
