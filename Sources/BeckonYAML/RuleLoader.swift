import BeckonCore
import Foundation

/// Loads rule files from paths (files or folders, searched recursively for `.yaml` and `.yml`), checks them
/// all, and compiles them into one ``CompiledRuleSet``.
///
/// ```swift
/// let result = RuleLoader.load(paths: ["rules/bossup"])
/// guard let ruleSet = result.ruleSet else { print(result.rendered()); exit(1) }
/// ```
public struct LoadResult: Sendable {
    public var ruleSet: CompiledRuleSet?
    public var diagnostics: [Diagnostic]
    /// The files read, in load order.
    public var files: [String]
    /// File contents by path, for rendering source lines under diagnostics.
    public var sources: [String: String]
    public var ruleCount: Int
    /// The campaign test files among the files read (`tests:`), for `beckon test`.
    public var testSuites: [TestSuiteSpec] = []

    public var errorCount: Int { diagnostics.count(where: { $0.severity == .error }) }
    public var warningCount: Int { diagnostics.count(where: { $0.severity == .warning }) }

    /// Several results reported as one (their files, rules and problems; no rule set), for `validate`.
    public static func combining(_ results: [LoadResult]) -> LoadResult {
        var all = LoadResult(ruleSet: nil, diagnostics: [], files: [], sources: [:], ruleCount: 0)
        for r in results {
            all.diagnostics += r.diagnostics
            all.files += r.files
            all.sources.merge(r.sources) { a, _ in a }
            all.ruleCount += r.ruleCount
            all.testSuites += r.testSuites
        }
        return all
    }

    /// Every diagnostic, sorted, with source lines and carets.
    public func rendered() -> String {
        var bag = DiagnosticBag()
        bag.append(contentsOf: diagnostics)
        return DiagnosticRenderer(sources: sources).render(bag.sorted)
    }
}

public enum RuleLoader {
    /// Loads everything under `paths` as one rule set. Files load in path order, which is also the tie-break order
    /// of rules. A path that cannot be read is an error like any other: there is then no rule set.
    public static func load(paths: [String]) -> LoadResult {
        let read = read(paths: paths)
        var result = load(texts: read.texts)
        result.diagnostics = read.diagnostics + result.diagnostics
        result.sources.merge(read.sources) { a, _ in a }
        if read.diagnostics.contains(where: { $0.severity == .error }) { result.ruleSet = nil }
        return result
    }

    /// Loads everything under `paths` for `validate`: each folder that has a settings file is a rule set of its
    /// own, with the files under it (less those under a deeper folder with its own settings), as `beckon test`
    /// loads an app's folder; the files under no settings folder are one more. One result per rule set, in the
    /// order of their first files; problems reading the paths come first, in a result of their own.
    public static func loadEach(paths: [String]) -> [LoadResult] {
        let read = read(paths: paths)
        var results: [LoadResult] = []
        if !read.diagnostics.isEmpty {
            results.append(
                LoadResult(ruleSet: nil, diagnostics: read.diagnostics, files: [], sources: read.sources, ruleCount: 0))
        }
        let parsed = parse(texts: read.texts)
        let settingsDirs = parsed.filter { $0.node?["settings"] != nil }.map { folder(of: $0.path) }
        var order: [String] = []
        var groups: [String: [ParsedText]] = [:]
        for p in parsed {
            let dir = folder(of: p.path)
            let key =
                settingsDirs.filter { dir == $0 || dir.hasPrefix($0 == "/" ? "/" : $0 + "/") }.max { $0.count < $1.count } ?? ""
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(p)
        }
        for key in order { results.append(compile(groups[key]!)) }
        return results
    }

    /// The absolute, standardized folder of a file.
    static func folder(of path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return ((absolute as NSString).standardizingPath as NSString).deletingLastPathComponent
    }

    /// Finds the campaign test files (`tests:`) under `paths` and parses them; other files are not compiled.
    public static func loadTests(paths: [String]) -> LoadResult {
        let read = read(paths: paths)
        var texts = read.texts
        var diagnostics = read.diagnostics
        var suites: [TestSuiteSpec] = []
        var sources = read.sources
        for (path, text) in texts {
            let (node, yamlProblems) = YAMLLoader.parse(text, path: path)
            guard let node else {
                diagnostics += yamlProblems
                sources[path] = text
                continue
            }
            guard node["tests"] != nil else { continue }
            sources[path] = text
            diagnostics += yamlProblems
            var parser = FileParser(file: path)
            if case .tests(let t)? = parser.parse(node) { suites.append(t) }
            diagnostics += parser.diagnostics.items
        }
        texts = texts.filter { sources[$0.path] != nil }
        let hasErrors = diagnostics.contains { $0.severity == .error }
        return LoadResult(
            ruleSet: nil, diagnostics: diagnostics, files: texts.map(\.path), sources: sources, ruleCount: 0,
            testSuites: hasErrors ? [] : suites)
    }

    /// Reads the `.yaml` files named by `paths` (files, or folders searched recursively), each once. Every path
    /// that names nothing readable is an error: a missing path, a dangling link, a folder without `.yaml` files, a
    /// file over the size limit (never read past it), a file that is not UTF-8 (at its first bad byte).
    /// `sources` holds the text of files that could not be used, for showing their lines under the diagnostics.
    static func read(
        paths: [String]
    ) -> (texts: [(path: String, text: String)], diagnostics: [Diagnostic], sources: [String: String]) {
        var diagnostics: [Diagnostic] = []
        var sources: [String: String] = [:]
        var files: [String] = []
        func fileError(
            _ id: DiagnosticID, _ path: String, _ message: String, at position: SourcePosition? = nil, suggestion: String? = nil
        ) {
            diagnostics.append(
                .error(
                    id, message, at: SourceLocation(file: path, position: position ?? SourcePosition(line: 1, column: 1)),
                    suggestion: suggestion))
        }
        for p in paths {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: p, isDirectory: &isDir) else {
                if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: p) {
                    fileError(.unreadableFile, p, "\(p) is a symbolic link to \(target), which does not exist")
                } else {
                    fileError(.unreadableFile, p, "no such file or folder: \(p)")
                }
                continue
            }
            if isDir.boolValue {
                let found = yamlFiles(under: p)
                if found.isEmpty { fileError(.noRuleFiles, p, "no .yaml files found in \(p)") }
                for f in found {
                    // (Only files are read from a folder: opening a named pipe waits for a writer, for ever.)
                    let type =
                        (try? FileManager.default.attributesOfItem(atPath: (f as NSString).resolvingSymlinksInPath))?[.type]
                        as? FileAttributeType
                    if let type, type != .typeRegular {
                        fileError(
                            .unreadableFile, f, "\(f) is not a file (a named pipe, a socket or a device): it is not read",
                            suggestion: "name it without .yaml, or name it on the command line if it is meant to be read")
                        continue
                    }
                    files.append(f)
                }
            } else {
                files.append(p)
            }
        }
        var seen = Set<String>()
        files = files.filter { seen.insert(($0 as NSString).standardizingPath).inserted }
        var texts: [(String, String)] = []
        for f in files {
            let data: [UInt8]
            switch readBytes(f, limit: YAMLLoader.maxFileBytes) {
            case .success(let d): data = d
            case .failure(.tooLarge(let size)):
                fileError(
                    .limitExceeded, f,
                    "the file is \(size.map { "\($0) bytes" } ?? "larger than the limit"); the limit is \(YAMLLoader.maxFileBytes) bytes"
                )
                continue
            case .failure(.unreadable(let why)):
                fileError(.unreadableFile, f, "cannot read \(f)" + (why.map { ": \($0)" } ?? ""))
                continue
            }
            guard let text = String(validating: data, as: UTF8.self) else {
                let (offset, byte) = firstInvalidUTF8(data)
                let before = String(decoding: data[..<offset], as: UTF8.self)
                let position = SourceLines(before).position(ofScalarOffset: before.unicodeScalars.count)
                let hex = String(byte, radix: 16, uppercase: true)
                fileError(
                    .unreadableFile, f, "\(f) is not UTF-8 text: invalid UTF-8 byte 0x\(hex.count == 1 ? "0" : "")\(hex)",
                    at: position, suggestion: "save the file as UTF-8")
                sources[f] = String(decoding: data, as: UTF8.self)
                continue
            }
            texts.append((f, text))
        }
        return (texts, diagnostics, sources)
    }

    enum ReadFailure: Error {
        /// Over the limit: its size when known (a special file may have none).
        case tooLarge(Int?)
        case unreadable(String?)
    }

    /// A file's bytes, never more than `limit`: the size is checked before reading, and reading stops one byte
    /// past the limit (a file that grows, or a device, cannot make it read more).
    static func readBytes(_ path: String, limit: Int) -> Result<[UInt8], ReadFailure> {
        if let attributes = try? FileManager.default.attributesOfItem(atPath: path) {
            if (attributes[.type] as? FileAttributeType) == .typeDirectory { return .failure(.unreadable("it is a folder")) }
            if let size = (attributes[.size] as? NSNumber)?.intValue, size > limit { return .failure(.tooLarge(size)) }
        }
        guard let handle = FileHandle(forReadingAtPath: path) else { return .failure(.unreadable(nil)) }
        defer { try? handle.close() }
        let data: Data
        do { data = try handle.read(upToCount: limit + 1) ?? Data() } catch {
            return .failure(.unreadable("\(error.localizedDescription)"))
        }
        if data.count > limit { return .failure(.tooLarge(nil)) }
        return .success([UInt8](data))
    }

    /// The offset and value of the first byte that is not part of valid UTF-8.
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> (offset: Int, byte: UInt8) {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded): offset += encoded.count
            case .error: return (offset, offset < bytes.count ? bytes[offset] : 0)
            case .emptyInput: return (bytes.count, 0)
            }
        }
    }

    /// Loads files given as (path, contents) pairs, in that order.
    /// `readsNamedFiles`: whether the files the rules name (a destination's key files) are read and checked; off for
    /// texts that are not a rule set on disk (the console's playground: nothing is read from disk).
    public static func load(texts: [(path: String, text: String)], readsNamedFiles: Bool = true) -> LoadResult {
        compile(parse(texts: texts), readsNamedFiles: readsNamedFiles)
    }

    /// As ``load(texts:)``, with a lower bound on history series than the real one (for tests of the bound).
    static func load(texts: [(path: String, text: String)], maxSeries: Int) -> LoadResult {
        compile(parse(texts: texts), maxSeries: maxSeries)
    }

    /// A file's text and its YAML tree (`nil` when the YAML has errors).
    struct ParsedText {
        var path: String
        var text: String
        var node: SourceNode?
        var problems: [Diagnostic]
    }

    static func parse(texts: [(path: String, text: String)]) -> [ParsedText] {
        texts.map { path, text in
            let (node, problems) = YAMLLoader.parse(text, path: path)
            return ParsedText(path: path, text: text, node: node, problems: problems)
        }
    }

    /// Reads the files' trees into the model and compiles them into one rule set.
    static func compile(
        _ files: [ParsedText], maxSeries: Int = ValueLimits.maxSeries, readsNamedFiles: Bool = true
    ) -> LoadResult {
        var diagnostics: [Diagnostic] = []
        var parsed: [ParsedFile] = []
        var sources: [String: String] = [:]
        for f in files {
            sources[f.path] = f.text
            diagnostics += f.problems
            guard let node = f.node else { continue }
            var parser = FileParser(file: f.path, readsNamedFiles: readsNamedFiles)
            if let p = parser.parse(node) { parsed.append(p) }
            diagnostics += parser.diagnostics.items
        }
        let ruleCount = parsed.reduce(0) { n, f in if case .rules(let r) = f { n + r.rules.count } else { n } }
        // Compile even with problems so far: expression and reference errors are reported in the same run.
        let (set, compileProblems) = RuleSetCompiler.compile(parsed, maxSeries: maxSeries)
        diagnostics += compileProblems
        let hasErrors = diagnostics.contains { $0.severity == .error }
        let suites = parsed.compactMap { if case .tests(let t) = $0 { t } else { nil } }
        return LoadResult(
            ruleSet: hasErrors ? nil : set, diagnostics: diagnostics, files: files.map(\.path), sources: sources,
            ruleCount: ruleCount, testSuites: suites)
    }

    /// The `.yaml` files a load of `paths` reads (a file path as it is; folders searched recursively), sorted.
    public static func files(under paths: [String]) -> [String] {
        paths.flatMap { p -> [String] in
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: p, isDirectory: &isDirectory) else { return [p] }
            return isDirectory.boolValue ? yamlFiles(under: p) : [p]
        }
    }

    static func yamlFiles(under dir: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: dir) else { return [] }
        var out: [String] = []
        while let rel = e.nextObject() as? String {
            let name = (rel as NSString).lastPathComponent
            if name.hasPrefix(".") { continue }
            if (e.fileAttributes?[.type] as? FileAttributeType) == .typeDirectory { continue }
            if rel.hasSuffix(".yaml") || rel.hasSuffix(".yml") { out.append((dir as NSString).appendingPathComponent(rel)) }
        }
        return out.sorted()
    }
}
