import BeckonCore
import BeckonYAML

/// `beckon validate PATH...`: every problem in one run, as `file:line:col: error: message [id]` with the source
/// line and a caret. Exit status 1 when there are errors, 0 when clean (warnings alone do not fail). Each folder with
/// its own settings file is validated as a rule set of its own (several apps' folders validate together), and all
/// of them are reported in one run, with one summary.
public enum ValidateRunner {
    public static func run(paths: [String], console: any Console) -> Int32 {
        let result = LoadResult.combining(RuleLoader.loadEach(paths: paths))
        if !result.diagnostics.isEmpty { console.err(result.rendered()) }
        let files = result.files.count
        let summary =
            "\(files) file\(files == 1 ? "" : "s"), \(result.ruleCount) rule\(result.ruleCount == 1 ? "" : "s"): "
            + "\(result.errorCount) error\(result.errorCount == 1 ? "" : "s"), \(result.warningCount) warning\(result.warningCount == 1 ? "" : "s")"
        if result.errorCount > 0 {
            console.err(summary + "\n")
            return 1
        }
        console.out(summary + "\n")
        return 0
    }
}
