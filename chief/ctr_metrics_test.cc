#include "chief/ctr_metrics.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

TEST(CtrMetrics, LogLossCalibrationAndRatesOfAFewExamples) {
  // p = 0.8 (y 1), 0.4 (y 0), 0.1 (y 0), 0.5 (y 1):
  // log loss = -(ln 0.8 + ln 0.6 + ln 0.9 + ln 0.5) / 4
  //          = (0.22314355 + 0.51082562 + 0.10536052 + 0.69314718) / 4
  //          = 0.38311922; mean prediction 0.45, positive rate 0.5.
  CtrMetrics metrics;
  metrics.Add(std::vector<float>{0.8f, 0.4f, 0.1f, 0.5f},
              std::vector<int32_t>{1, 0, 0, 1});
  EXPECT_EQ(metrics.examples(), 4);
  EXPECT_NEAR(metrics.log_loss(), 0.38311922, 1e-6);
  EXPECT_NEAR(metrics.mean_prediction(), 0.45, 1e-7);
  EXPECT_DOUBLE_EQ(metrics.positive_rate(), 0.5);
  EXPECT_NEAR(metrics.calibration(), 0.9, 1e-6);
}

TEST(CtrMetrics, ProbabilitiesAreClippedForTheLogLoss) {
  // A confident mistake costs -ln(1e-7) = 16.118096, not infinity.
  CtrMetrics metrics;
  metrics.Add(0.0, 1);
  EXPECT_NEAR(metrics.log_loss(), 16.11809565, 1e-5);
  metrics.Add(1.0, 1);  // -ln(1 - 1e-7) ~ 1e-7.
  EXPECT_NEAR(metrics.log_loss(), (16.11809565 + 1e-7) / 2, 1e-5);
}

TEST(CtrMetrics, CalibrationIsUndefinedWithoutPositives) {
  CtrMetrics metrics;
  EXPECT_EQ(metrics.log_loss(), 0);
  EXPECT_TRUE(std::isnan(metrics.calibration()));
  metrics.Add(0.3, 0);
  EXPECT_TRUE(std::isnan(metrics.calibration()));
  EXPECT_NEAR(metrics.log_loss(), -std::log(0.7), 1e-9);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
