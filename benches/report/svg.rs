//! The report's plot, drawn as SVG text: throughput bars per file and
//! terminal, and upgrade blackout against the pane count.

/// One bar: MB/s of a terminal (`label`) on a file (`group`).
pub struct Bar {
    pub group: String,
    pub label: String,
    pub value: f64,
}

const W: f64 = 900.0;
const H: f64 = 380.0;
const COLOURS: &[&str] = &["#888888", "#2a7ab8", "#d2691e", "#6aa84f"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A round axis maximum at or above `v`.
fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&m| m >= v)
        .unwrap_or(10.0 * mag)
}

/// Horizontal grid lines and their labels for a y axis from 0 to `max`.
fn grid(out: &mut String, x0: f64, x1: f64, y0: f64, y1: f64, max: f64, unit: &str) {
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = y0 - (y0 - y1) * f64::from(i) / 4.0;
        out.push_str(&format!(
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"11\">{}{unit}</text>\n",
            x0 - 4.0,
            y + 4.0,
            trim(v)
        ));
    }
}

fn trim(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The tab view's bars: split-view throughput and the server's CPU per
/// second of composed frames, ptyd against tmux.
#[derive(Default)]
pub struct TabBars {
    pub throughput: Vec<Bar>,
    pub cpu: Vec<Bar>,
}

/// A chart's box (x0, x1, y0 the bottom, y1 the top), its title, and its
/// legend's row and spacing.
struct Chart<'a> {
    frame: (f64, f64, f64, f64),
    title: &'a str,
    legend: (f64, f64),
    none: &'a str,
}

/// Grouped bars, one colour per label.
fn bar_chart(out: &mut String, chart: &Chart<'_>, bars: &[Bar]) {
    let (x0, x1, y0, y1) = chart.frame;
    out.push_str(&format!(
        "<text x=\"{x0}\" y=\"{:.1}\" font-size=\"13\">{}</text>\n",
        y1 - 15.0,
        esc(chart.title)
    ));
    let max = nice_max(bars.iter().map(|b| b.value).fold(0.0, f64::max));
    grid(out, x0, x1, y0, y1, max, "");
    let mut groups: Vec<&str> = Vec::new();
    let mut labels: Vec<&str> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
        if !labels.contains(&b.label.as_str()) {
            labels.push(&b.label);
        }
    }
    if groups.is_empty() || labels.is_empty() {
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>\n",
            x0 + 40.0,
            (y0 + y1) / 2.0,
            esc(chart.none)
        ));
        return;
    }
    let gw = (x1 - x0) / groups.len() as f64;
    let bw = gw * 0.8 / labels.len() as f64;
    for (gi, g) in groups.iter().enumerate() {
        let gx = x0 + gw * gi as f64 + gw * 0.1;
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\">{}</text>\n",
            gx + gw * 0.4,
            y0 + 16.0,
            esc(g)
        ));
        for (li, l) in labels.iter().enumerate() {
            let Some(b) = bars.iter().find(|b| b.group == *g && b.label == *l) else {
                continue;
            };
            let h = (y0 - y1) * (b.value / max).clamp(0.0, 1.0);
            let x = gx + bw * li as f64;
            out.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>\n\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{}</text>\n",
                y0 - h,
                bw * 0.9,
                COLOURS[li % COLOURS.len()],
                x + bw * 0.45,
                y0 - h - 3.0,
                trim(b.value)
            ));
        }
    }
    let (ly, step) = chart.legend;
    for (li, l) in labels.iter().enumerate() {
        let x = x0 + step * li as f64;
        out.push_str(&format!(
            "<rect x=\"{x}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{}\"/>\n\
             <text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n",
            COLOURS[li % COLOURS.len()],
            x + 14.0,
            ly + 9.0,
            esc(l)
        ));
    }
}

/// The whole picture: bars on the left, blackout on the right, and below
/// them, when the tab view was measured, its two charts.
/// `blackout` is (panes, p50 ms, p99 ms) per pane count.
pub fn draw(
    mode: &str,
    date: &str,
    bars: &[Bar],
    blackout: &[(usize, f64, f64)],
    tab: &TabBars,
) -> String {
    let tab_row = !tab.throughput.is_empty() || !tab.cpu.is_empty();
    let height = if tab_row { 2.0 * H } else { H };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" \
         viewBox=\"0 0 {W} {height}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">ptyd benchmark report ({}), {}</text>\n",
        esc(mode),
        esc(date)
    );
    let (y0, y1) = (320.0, 60.0);
    bar_chart(
        &mut out,
        &Chart {
            frame: (60.0, 520.0, y0, y1),
            title: "Output throughput, MB/s (higher is better)",
            legend: (345.0, 115.0),
            none: "no throughput measured",
        },
        bars,
    );
    if tab_row {
        bar_chart(
            &mut out,
            &Chart {
                frame: (60.0, 520.0, H + y0, H + y1),
                title: "Tab view, cat in one pane of two: MB/s (higher is better)",
                legend: (H + 345.0, 150.0),
                none: "no split-view throughput measured",
            },
            &tab.throughput,
        );
        bar_chart(
            &mut out,
            &Chart {
                frame: (620.0, 880.0, H + y0, H + y1),
                title: "Tab view: server CPU s per s (lower is better)",
                legend: (H + 345.0, 130.0),
                none: "no server CPU measured",
            },
            &tab.cpu,
        );
    }
    // Blackout against pane count.
    let (x0, x1) = (620.0, 880.0);
    out.push_str(&format!(
        "<text x=\"{}\" y=\"45\" font-size=\"13\">Upgrade blackout, ms (lower is better)</text>\n",
        x0 - 40.0
    ));
    let max = nice_max(blackout.iter().map(|b| b.2).fold(0.0, f64::max));
    grid(&mut out, x0, x1, y0, y1, max, "");
    if blackout.is_empty() {
        out.push_str("<text x=\"650\" y=\"200\" font-size=\"12\">no upgrade measured</text>\n");
    } else {
        let step = (x1 - x0) / blackout.len() as f64;
        let point = |i: usize, v: f64| {
            (
                x0 + step * (i as f64 + 0.5),
                y0 - (y0 - y1) * (v / max).clamp(0.0, 1.0),
            )
        };
        for (series, colour, pick) in [("p50", COLOURS[1], 0usize), ("p99", COLOURS[2], 1usize)] {
            let pts: Vec<(f64, f64)> = blackout
                .iter()
                .enumerate()
                .map(|(i, b)| point(i, if pick == 0 { b.1 } else { b.2 }))
                .collect();
            let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            out.push_str(&format!(
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>\n",
                path.join(" ")
            ));
            for (x, y) in &pts {
                out.push_str(&format!(
                    "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>\n"
                ));
            }
            let lx = x0 + if pick == 0 { 0.0 } else { 70.0 };
            out.push_str(&format!(
                "<rect x=\"{lx}\" y=\"345\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\n\
                 <text x=\"{}\" y=\"354\" font-size=\"11\">{series}</text>\n",
                lx + 14.0
            ));
        }
        for (i, b) in blackout.iter().enumerate() {
            let (x, _) = point(i, 0.0);
            out.push_str(&format!(
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\">{} panes</text>\n",
                y0 + 16.0,
                b.0
            ));
        }
    }
    out.push_str("</svg>\n");
    out
}
