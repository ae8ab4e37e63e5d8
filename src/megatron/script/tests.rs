//! The script reader against bash's own semantics, one construct at a time (each
//! expectation is what `bash` does with the same text).

use super::*;

/// The launch's flags as `key → value` (later flags win, as argparse does).
fn flags(script: &str) -> BTreeMap<String, String> {
    let s = scan_script("t.sh", script).unwrap_or_else(|e| panic!("{e}"));
    s.args.into_iter().map(|a| (a.key, a.value)).collect()
}

fn scan(script: &str) -> ScriptScan {
    scan_script("t.sh", script).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn quoting_and_field_splitting_follow_bash() {
    let f =
        flags("X='a  b'\nY=\"\"\npython pretrain_gpt.py --one $X --two \"$X\" --three $Y --four\n");
    assert_eq!(f["one"], "a", "unquoted: split into `a` and `b`");
    assert_eq!(f["two"], "a  b", "quoted: one field, blanks kept");
    assert_eq!(f["three"], "True", "an empty unquoted expansion vanishes");
    assert_eq!(f["four"], "True");
}

#[test]
fn parameter_operators_default_assign_and_alternate() {
    let f = flags(
        "E=\nA=${UNSET:-4}\nB=${E-5}\nC=${E:-6}\n: ${D:=7}\nF=${A:+alt}\n\
         python pretrain_gpt.py --a $A --b \"$B\" --c $C --d $D --f $F --g ${UNSET2:-\"x y\"}\n",
    );
    assert_eq!(f["a"], "4");
    assert_eq!(f["b"], "", "`-` without colon: E is set (empty)");
    assert_eq!(f["c"], "6", "`:-`: empty counts as unset");
    assert_eq!(f["d"], "7", "`:=` assigns");
    assert_eq!(f["f"], "alt");
    assert_eq!(
        f["g"], "x",
        "the operand's quotes are removed, the unquoted result split"
    );
}

#[test]
fn arrays_append_expand_whole_or_first_and_empty_ones_vanish() {
    let f = flags(
        "A=(--x 1)\nA+=(--y \"2 3\")\nE=()\n\
         python pretrain_gpt.py \"${A[@]}\" \"${E[@]}\" --first=${A} --z\n",
    );
    assert_eq!(f["x"], "1");
    assert_eq!(f["y"], "2 3", "a quoted element stays one field");
    assert_eq!(f["first"], "--x", "${{A}} is the first element");
    assert_eq!(f["z"], "True");
}

#[test]
fn arithmetic_and_numeric_tests_use_checked_integers() {
    let f = flags(
        "N=2\nG=8\nW=$(( N * G ))\nif (( W % 16 == 0 )) && [ $W -ge 16 ]; then P=2; else P=1; fi\n\
         python pretrain_gpt.py --w $W --p $P --h $((0x10 + 010))\n",
    );
    assert_eq!((f["w"].as_str(), f["p"].as_str()), ("16", "2"));
    assert_eq!(
        f["h"], "24",
        "hexadecimal and octal literals as bash reads them"
    );
}

#[test]
fn case_takes_the_first_matching_arm_and_its_patterns_are_globs() {
    let f = flags(
        "M=llama-70b\ncase \"$M\" in\n  gpt*) L=1 ;;\n  llama-7b|llama-13b) L=2 ;;\n  \"llama-\"*) L=3 ;;\n  *) L=4 ;;\nesac\n\
         python pretrain_gpt.py --l $L\n",
    );
    assert_eq!(f["l"], "3");
}

#[test]
fn loops_run_as_bash_runs_them() {
    let f = flags(
        "i=0\nwhile [ $i -lt 3 ]; do i=$((i+1)); done\n\
         S=\nfor k in a b c; do S=\"$S$k\"; done\n\
         until [ $i -eq 0 ]; do i=$((i-1)); if [ $i -eq 1 ]; then break; fi; done\n\
         python pretrain_gpt.py --i $i --s $S\n",
    );
    assert_eq!(f["i"], "1", "the until loop breaks at 1");
    assert_eq!(f["s"], "abc");
}

#[test]
fn functions_get_their_arguments_and_run_where_they_are_called() {
    let f = flags(
        "set_tp() {\n  local t=$1\n  TP=$(( t * 2 ))\n  return 0\n  TP=99\n}\n\
         function launch {\n  python pretrain_gpt.py --tp $TP --name \"$2\"\n}\nset_tp 4\nlaunch x \"my run\"\n",
    );
    assert_eq!(f["tp"], "8", "return ends the function");
    assert_eq!(f["name"], "my run");
}

#[test]
fn a_branch_that_exits_does_not_reach_the_launch() {
    let f = flags(
        "TP=1\nif [ -f /etc/cluster.conf ]; then TP=4; exit 0; fi\n\
         [ -d /data ] || { echo missing; exit 1; }\npython pretrain_gpt.py --tp $TP\n",
    );
    assert_eq!(
        f["tp"], "1",
        "the file test is undecided, but its true side exits: only TP=1 reaches the launch"
    );
}

#[test]
fn an_undecided_append_keeps_the_known_words_and_names_the_condition_for_the_others() {
    let s = scan(
        "OPTS=\"--num-layers 2 --log-dir /tmp\"\nif [ -f /etc/x ]; then OPTS=\"$OPTS --bf16 --wandb-project p\"; fi\n\
         python pretrain_gpt.py $OPTS\n",
    );
    let known: BTreeMap<_, _> = s
        .args
        .iter()
        .map(|a| (a.key.as_str(), a.value.as_str()))
        .collect();
    assert_eq!(known["num-layers"], "2");
    assert_eq!(known["log-dir"], "/tmp");
    let (key, e) = &s.unresolved[0];
    assert_eq!(key, "bf16");
    let e = e.to_string();
    assert!(
        e.starts_with("t.sh:3:")
            && e.contains("the condition at t.sh:2:4")
            && e.contains("`-f /etc/x`"),
        "{e}"
    );
}

#[test]
fn command_output_stays_unknown_but_does_not_hide_the_launch() {
    let s = scan(
        "DIR=$(pwd)\nHOST=`hostname`\n$DIR/pretrain_gpt.py --save $DIR/ckpt-$HOST --num-layers 4\n",
    );
    let f: BTreeMap<_, _> = s
        .args
        .iter()
        .map(|a| (a.key.as_str(), a.value.as_str()))
        .collect();
    assert_eq!(f["num-layers"], "4");
    assert_eq!(
        f["save"], "$DIR/ckpt-$HOST",
        "kept as the launch line writes it"
    );
    let s = scan("N=$(nproc)\npython pretrain_gpt.py --tensor-model-parallel-size $N\n");
    let (key, e) = &s.unresolved[0];
    assert_eq!(key, "tensor_model_parallel_size");
    assert!(
        e.to_string().contains("`$(nproc)` is command output"),
        "{e}"
    );
}

#[test]
fn eval_and_sh_dash_c_run_the_command_they_are_given() {
    let f = flags("CMD=\"python pretrain_gpt.py --num-layers 6 > log 2>&1\"\neval $CMD\n");
    assert_eq!(
        f["num-layers"], "6",
        "redirections inside the string are not flags"
    );
    assert!(!f.contains_key("2"));
    let f = flags("run=\"python -u pretrain_gpt.py --num-layers 3\"\nsrun -N 2 sh -c \"${run}\"\n");
    assert_eq!(f["num-layers"], "3");
}

#[test]
fn here_documents_are_written_files_expanded_unless_their_delimiter_is_quoted() {
    let s = scan(
        "S=2\ncat > a.json <<EOF\n{\"stage\": $S}\nEOF\ncat <<'END' > b.json\n{\"stage\": $S}\nEND\n\
         echo '{\"x\": 1}' > c.json\npython pretrain_gpt.py\n",
    );
    assert_eq!(s.files["a.json"].text.as_deref(), Ok("{\"stage\": 2}\n"));
    assert_eq!(s.files["a.json"].line, 3);
    assert_eq!(s.files["b.json"].text.as_deref(), Ok("{\"stage\": $S}\n"));
    assert_eq!(s.files["c.json"].text.as_deref(), Ok("{\"x\": 1}"));
}

#[test]
fn launcher_flags_give_the_world_size_and_an_unknown_node_count_is_a_warning() {
    let f = flags("torchrun --nproc-per-node=4 --nnodes=1:3 pretrain_gpt.py --num-layers 2\n");
    assert_eq!(f["world_size"], "12", "elastic 1:3 takes the maximum");
    let s = scan("torchrun --nproc_per_node 8 --nnodes $NODES pretrain_gpt.py --num-layers 2\n");
    assert!(!s.args.iter().any(|a| a.key == "world_size"));
    assert!(
        s.warnings
            .iter()
            .any(|w| w.field == "world_size" && w.message.contains("NODES")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn scripts_bash_would_reject_are_errors_naming_the_open_construct() {
    let e = scan_script("t.sh", "x=1\nif [ $x ]; then\n  echo\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "t.sh:2:1: script: expected `fi` closing the `if` opened here"
    );
    let e = scan_script("t.sh", "A=(1 2\n").unwrap_err().to_string();
    assert!(e.starts_with("t.sh:1:1: script: expected `)`"), "{e}");
    let deep = "{ ".repeat(500);
    assert!(scan_script("t.sh", &deep)
        .unwrap_err()
        .to_string()
        .contains("nested deeper"));
}

#[test]
fn runaway_scripts_are_bounded_in_memory_and_time() {
    // Doubling a string forever: values are capped, the loop bounded, the reader returns.
    match scan_script(
        "t.sh",
        "X=ab\nwhile true; do X=\"$X$X\"; done\npython pretrain_gpt.py --x \"$X\"\n",
    ) {
        Ok(s) => {
            let x = &s.args.iter().find(|a| a.key == "x").unwrap().value;
            assert!(x.len() < 2 * expand::MAX_VALUE_BYTES, "{}", x.len());
        }
        Err(e) => assert!(
            e.to_string().starts_with("t.sh:2:") && e.to_string().contains("evaluation budget"),
            "{e}"
        ),
    }
    // Mutual recursion stops at the call depth; a fork bomb is just two calls.
    let s = scan_script("t.sh", "f() { f; f; }\nf\npython pretrain_gpt.py\n");
    assert!(s.is_ok() || s.unwrap_err().to_string().contains("evaluation budget"));
    // A crafted marker byte in the input cannot stand for an unknown value.
    let f = flags("python pretrain_gpt.py --x a\u{1}0\u{1}b\n");
    assert_eq!(f["x"], "a\u{FFFD}0\u{FFFD}b");
}
