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

    /// Every diagnostic, sorted, with source lines and carets.
    public func rendered() -> String {
        var bag = DiagnosticBag()
        bag.append(contentsOf: diagnostics)
        return DiagnosticRenderer(sources: sources).render(bag.sorted)
    }
}

public enum RuleLoader {
    /// Loads everything under `paths`. Files load in path order, which is also the tie-break order of rules.
    public static func load(paths: [String]) -> LoadResult {
        let (texts, diagnostics) = read(paths: paths)
        var result = load(texts: texts)
        result.diagnostics = diagnostics + result.diagnostics
        return result
    }

    /// Finds the campaign test files (`tests:`) under `paths` and parses them; other files are not compiled.
    public static func loadTests(paths: [String]) -> LoadResult {
        var (texts, diagnostics) = read(paths: paths)
        var suites: [TestSuiteSpec] = []
        var sources: [String: String] = [:]
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

    /// Reads the `.yaml` files named by `paths` (files, or folders searched recursively), each once.
    static func read(paths: [String]) -> (texts: [(path: String, text: String)], diagnostics: [Diagnostic]) {
        var diagnostics: [Diagnostic] = []
        var files: [String] = []
        for p in paths {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: p, isDirectory: &isDir) else {
                diagnostics.append(
                    .error(
                        .unreadableFile, "no such file or folder: \(p)",
                        at: SourceLocation(file: p, position: SourcePosition(line: 1, column: 1))))
                continue
            }
            if isDir.boolValue {
                files += yamlFiles(under: p)
            } else {
                files.append(p)
            }
        }
        var seen = Set<String>()
        files = files.filter { seen.insert(($0 as NSString).standardizingPath).inserted }
        var texts: [(String, String)] = []
        for f in files {
            guard let data = FileManager.default.contents(atPath: f) else {
                diagnostics.append(
                    .error(
                        .unreadableFile, "cannot read \(f)",
                        at: SourceLocation(file: f, position: SourcePosition(line: 1, column: 1))))
                continue
            }
            guard let text = String(data: data, encoding: .utf8) else {
                diagnostics.append(
                    .error(
                        .unreadableFile, "\(f) is not UTF-8 text",
                        at: SourceLocation(file: f, position: SourcePosition(line: 1, column: 1))))
                continue
            }
            texts.append((f, text))
        }
        if files.isEmpty && diagnostics.isEmpty {
            diagnostics.append(
                .error(
                    .noRuleFiles, "no .yaml files found in \(paths.joined(separator: ", "))",
                    at: SourceLocation(file: paths.first ?? ".", position: SourcePosition(line: 1, column: 1))))
        }
        return (texts, diagnostics)
    }

    /// Loads files given as (path, contents) pairs, in that order.
    public static func load(texts: [(path: String, text: String)]) -> LoadResult {
        var diagnostics: [Diagnostic] = []
        var parsed: [ParsedFile] = []
        var sources: [String: String] = [:]
        for (path, text) in texts {
            sources[path] = text
            let (node, yamlProblems) = YAMLLoader.parse(text, path: path)
            diagnostics += yamlProblems
            guard let node else { continue }
            var parser = FileParser(file: path)
            if let f = parser.parse(node) { parsed.append(f) }
            diagnostics += parser.diagnostics.items
        }
        let ruleCount = parsed.reduce(0) { n, f in if case .rules(let r) = f { n + r.rules.count } else { n } }
        // Compile even with problems so far: expression and reference errors are reported in the same run.
        let (set, compileProblems) = RuleSetCompiler.compile(parsed)
        diagnostics += compileProblems
        let hasErrors = diagnostics.contains { $0.severity == .error }
        let suites = parsed.compactMap { if case .tests(let t) = $0 { t } else { nil } }
        return LoadResult(
            ruleSet: hasErrors ? nil : set, diagnostics: diagnostics, files: texts.map(\.path), sources: sources,
            ruleCount: ruleCount, testSuites: suites)
    }

    static func yamlFiles(under dir: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: dir) else { return [] }
        var out: [String] = []
        while let rel = e.nextObject() as? String {
            let name = (rel as NSString).lastPathComponent
            if name.hasPrefix(".") { continue }
            if rel.hasSuffix(".yaml") || rel.hasSuffix(".yml") { out.append((dir as NSString).appendingPathComponent(rel)) }
        }
        return out.sorted()
    }
}
